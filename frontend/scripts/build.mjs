// Bundle frontend/src into ONE ES module, tb_gpuinsight/static/index.js (CSS inlined as text, injected at runtime),
// plus tb_gpuinsight/static/THIRD_PARTY_LICENSES.txt with the license texts of the bundled libraries.
//   node scripts/build.mjs           write both files
//   node scripts/build.mjs --check   rebuild into a temp folder and compare byte-for-byte with the committed files
import { build, transform } from "esbuild";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const staticDir = path.resolve(root, "../tb_gpuinsight/static");
const OUTPUTS = ["index.js", "THIRD_PARTY_LICENSES.txt"];

// Libraries that end up in the bundle, with the files holding their license (and NOTICE) texts.
const BUNDLED = [
  { pkg: "tabulator-tables", license: "MIT", files: ["LICENSE"] },
  { pkg: "echarts", license: "Apache-2.0", files: ["NOTICE", "LICENSE"] },
  { pkg: "zrender", license: "BSD-3-Clause", files: ["LICENSE"] },
  { pkg: "tslib", license: "0BSD", files: ["LICENSE.txt"] },
  { pkg: "cytoscape", license: "MIT", files: ["LICENSE"] },
  { pkg: "cytoscape-dagre", license: "MIT", files: ["LICENSE"] },
  // cytoscape-dagre's dist inlines these two; they are devDependencies only so that their license texts are here.
  { pkg: "@dagrejs/dagre", license: "MIT", files: ["LICENSE"] },
  { pkg: "@dagrejs/graphlib", license: "MIT", files: ["LICENSE"] },
];

function pkgDir(name) {
  return path.join(root, "node_modules", name);
}

function version(name) {
  return JSON.parse(readFileSync(path.join(pkgDir(name), "package.json"), "utf8")).version;
}

function licensesText() {
  const parts = [
    "Third-party software bundled in tb_gpuinsight/static/index.js (built from frontend/ by `npm run build`).",
    "",
  ];
  for (const lib of BUNDLED) {
    parts.push("=".repeat(78), `${lib.pkg} ${version(lib.pkg)} (${lib.license})`, "=".repeat(78), "");
    for (const file of lib.files) {
      parts.push(readFileSync(path.join(pkgDir(lib.pkg), file), "utf8").replace(/\r\n/g, "\n").trimEnd(), "");
    }
  }
  return parts.join("\n");
}

function banner() {
  const libs = BUNDLED.map((l) => `${l.pkg} ${version(l.pkg)} (${l.license})`).join(", ");
  return [
    "/*! tb_gpuinsight frontend, generated from frontend/src by `npm run build` in frontend/: do not edit.",
    ` * Bundles ${libs}; license texts in THIRD_PARTY_LICENSES.txt next to this file.`,
    " * Tabulator: Copyright (c) 2015-2026 Oli Folkerd. Apache ECharts: Copyright 2017-2026 The Apache Software",
    " * Foundation; this product includes software developed at The Apache Software Foundation (www.apache.org).",
    " * ZRender: Copyright (c) 2017, Baidu Inc. dagre and graphlib: Copyright (c) 2012-2014 Chris Pettitt. */",
  ].join("\n");
}

// The stylesheet is bundled as text, so esbuild never parses it: parse it here, so that a broken rule (an unclosed
// block swallows every rule after it) fails the build instead of silently unstyling later tabs.
async function checkCss() {
  const file = path.join(root, "src/styles.css");
  const { warnings } = await transform(readFileSync(file, "utf8"), { loader: "css" });
  if (warnings.length) {
    const where = (w) => (w.location ? `src/styles.css:${w.location.line}: ` : "src/styles.css: ");
    throw new Error(warnings.map((w) => where(w) + w.text).join("\n"));
  }
}

async function buildInto(dir) {
  await checkCss();
  await build({
    absWorkingDir: root,
    entryPoints: ["src/main.ts"],
    outfile: path.join(dir, "index.js"),
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2020",
    minify: true,
    sourcemap: false,
    legalComments: "eof",
    loader: { ".css": "text" },
    define: { "process.env.NODE_ENV": '"production"' },
    banner: { js: banner() },
    logLevel: "warning",
  });
  writeFileSync(path.join(dir, "THIRD_PARTY_LICENSES.txt"), licensesText());
}

if (process.argv.includes("--check")) {
  const dir = mkdtempSync(path.join(tmpdir(), "gpuinsight-check-"));
  try {
    await buildInto(dir);
    const stale = OUTPUTS.filter((name) => {
      const committed = path.join(staticDir, name);
      return !existsSync(committed) || !readFileSync(path.join(dir, name)).equals(readFileSync(committed));
    });
    if (stale.length) {
      const names = stale.map((name) => `tb_gpuinsight/static/${name}`).join(", ");
      console.error(`stale bundle: ${names} differs from a fresh build of frontend/src; run \`npm run build\` in frontend/`);
      process.exitCode = 1;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
} else {
  mkdirSync(staticDir, { recursive: true });
  await buildInto(staticDir);
}
