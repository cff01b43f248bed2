// Number formatting for the UI. Every formatter answers "—" for an unknown (null) value.

export const UNKNOWN = "—";

const formats = new Map<number, Intl.NumberFormat>();
function nf(digits: number): Intl.NumberFormat {
  let f = formats.get(digits);
  if (!f) {
    f = new Intl.NumberFormat("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
    formats.set(digits, f);
  }
  return f;
}
const int = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

function known(v: number | null | undefined): v is number {
  return typeof v === "number" && Number.isFinite(v);
}

/** Three significant digits, with thousands separators for big values: 0.0412, 3.21, 42.1, 989, 3,350. */
export function sig(v: number | null | undefined): string {
  if (!known(v)) return UNKNOWN;
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 100) return int.format(v);
  if (a >= 10) return nf(1).format(v);
  if (a >= 1) return nf(2).format(v);
  if (a >= 0.001) return nf(Math.min(6, 2 - Math.floor(Math.log10(a)))).format(v);
  return v.toExponential(1);
}

/** A duration given in microseconds: 812 ns, 12.3 µs, 4.56 ms, 1.23 s. */
export function time(us: number | null | undefined): string {
  if (!known(us)) return UNKNOWN;
  const a = Math.abs(us);
  if (a === 0) return "0 µs";
  if (a < 1) return `${sig(us * 1000)} ns`;
  if (a < 1000) return `${sig(us)} µs`;
  if (a < 1e6) return `${sig(us / 1000)} ms`;
  return `${sig(us / 1e6)} s`;
}

/** A 0..1 fraction as a percentage: 42.0 %, 0.35 %, < 0.01 %. */
export function pct(frac: number | null | undefined): string {
  if (!known(frac)) return UNKNOWN;
  const p = frac * 100;
  if (p === 0) return "0 %";
  if (Math.abs(p) < 0.01) return "< 0.01 %";
  if (Math.abs(p) < 10) return `${p.toFixed(2)} %`;
  return `${p.toFixed(1)} %`;
}

const SI: ReadonlyArray<readonly [number, string]> = [
  [1e18, "E"],
  [1e15, "P"],
  [1e12, "T"],
  [1e9, "G"],
  [1e6, "M"],
  [1e3, "k"],
];

/** A count with an SI prefix and a unit: 1.23 GFLOP, 45.6 MB. */
export function si(v: number | null | undefined, unit: string): string {
  if (!known(v)) return UNKNOWN;
  const a = Math.abs(v);
  for (const [scale, prefix] of SI) {
    if (a >= scale) return `${sig(v / scale)} ${prefix}${unit}`;
  }
  return `${sig(v)} ${unit}`;
}

export const flop = (v: number | null | undefined) => si(v, "FLOP");
export const bytes = (v: number | null | undefined) => si(v, "B");
export const tflops = (v: number | null | undefined) => (known(v) ? `${sig(v)} TFLOP/s` : UNKNOWN);
export const gbps = (v: number | null | undefined) => (known(v) ? `${sig(v)} GB/s` : UNKNOWN);
export const count = (v: number | null | undefined) => (known(v) ? int.format(v) : UNKNOWN);

export function isKnown(v: number | null | undefined): v is number {
  return known(v);
}
