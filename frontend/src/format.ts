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

const tiny = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 2 });

/** Three significant digits, with thousands separators for big values: 0.0412, 3.21, 42.1, 989, 3,350.
 *  Below 0.001: two significant digits in plain notation (0.00045), never 4.5e-4; below 1e-6: "< 0.000001". */
export function sig(v: number | null | undefined): string {
  if (!known(v)) return UNKNOWN;
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 100) return int.format(v);
  if (a >= 10) return nf(1).format(v);
  if (a >= 1) return nf(2).format(v);
  if (a >= 0.001) return nf(Math.min(6, 2 - Math.floor(Math.log10(a)))).format(v);
  if (a >= 1e-6) return tiny.format(v);
  return v < 0 ? "> −0.000001" : "< 0.000001";
}

/** "1 kernel", "2 kernels", "1,024 kernel calls" (`many` for irregular plurals). */
export function plural(n: number | null | undefined, one: string, many = `${one}s`): string {
  if (!known(n)) return `${UNKNOWN} ${many}`;
  return `${int.format(n)} ${n === 1 ? one : many}`;
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

/** A 0..1 fraction as a percentage: 42.0 %, 0.35 %, < 0.01 %, 1,234 %. */
export function pct(frac: number | null | undefined): string {
  if (!known(frac)) return UNKNOWN;
  const p = frac * 100;
  if (p === 0) return "0 %";
  if (Math.abs(p) < 0.01) return "< 0.01 %";
  if (Math.abs(p) < 10) return `${p.toFixed(2)} %`;
  if (Math.abs(p) < 1000) return `${p.toFixed(1)} %`;
  return `${int.format(p)} %`;
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

/** Occupancy in percent as the profiler reports it; 0 or absent means the trace has no estimate (a running kernel
 *  always has a resident warp), so it reads "—". */
export function occupancy(v: number | null | undefined): string {
  return known(v) && v > 0 ? `${sig(v)} %` : UNKNOWN;
}

/** Side of the roofline ridge, spelled so that it is not read as "limited by": null when FLOPs or bytes are unknown. */
export function boundLabel(bound: string | null | undefined): string | null {
  if (bound === "compute") return "compute-bound (right of ridge)";
  if (bound === "memory") return "memory-bound (left of ridge)";
  if (bound === "communication") return "communication (rated against its link)";
  return null;
}

/** What the "communication" label of a collective means (a tooltip). */
export const COMM_HELP = "A collective: rated against its interconnect link (bus bandwidth), not against the roofline.";

/** What a bound label means (a tooltip). */
export const BOUND_HELP =
  "Roofline side: a kernel whose arithmetic intensity (FLOP per DRAM byte) is right of the device's ridge point " +
  "(peak FLOP/s ÷ DRAM bandwidth) could at best reach the compute roof; left of it, the memory roof. It says which " +
  "roof is the ceiling, not that the kernel is near it: see % of peak and % of DRAM for that. Shown only where both " +
  "the FLOPs and the bytes are known.";
