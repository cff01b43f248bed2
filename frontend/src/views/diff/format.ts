// Formatting shared by the parts of the Diff tab: signed deltas, their colour, spreads and status tags.
import type { DiffRow, DiffSpread, DiffStatus } from "../../api";
import { h } from "../../dom";
import { isKnown, pct, time, UNKNOWN } from "../../format";

/** Below this share of the baseline a delta is shown as neutral, neither faster nor slower. */
const NEUTRAL_FRAC = 0.005;

/** A time delta with its sign: +12.3 µs, −4.56 ms, 0 µs. */
export function signedTime(us: number | null | undefined): string {
  if (!isKnown(us)) return UNKNOWN;
  if (us === 0) return "0 µs";
  return (us > 0 ? "+" : "−") + time(Math.abs(us));
}

/** A relative delta (a fraction) with its sign: +12.3 %, −4.00 %. */
export function signedPct(frac: number | null | undefined): string {
  if (!isKnown(frac)) return UNKNOWN;
  if (frac === 0) return "0 %";
  return (frac > 0 ? "+" : "−") + pct(Math.abs(frac));
}

/** "faster" (B takes less time than A), "slower", or "same" for a tiny or unknown change. */
export function deltaKind(deltaUs: number | null | undefined, baseUs: number | null | undefined): "faster" | "slower" | "same" {
  if (!isKnown(deltaUs) || deltaUs === 0) return "same";
  if (isKnown(baseUs) && baseUs > 0 && Math.abs(deltaUs) < baseUs * NEUTRAL_FRAC) return "same";
  return deltaUs < 0 ? "faster" : "slower";
}

export function deltaClass(deltaUs: number | null | undefined, baseUs: number | null | undefined): string {
  return `delta delta-${deltaKind(deltaUs, baseUs)}`;
}

export function spreadText(s: DiffSpread | null | undefined): string {
  if (!s) return UNKNOWN;
  return `min ${time(s.min)} · median ${time(s.median)} · max ${time(s.max)}`;
}

/** The title of the noise marker: both sides' per-span spreads. */
export function noiseTitle(r: DiffRow): string {
  return [
    "The change is smaller than the spread between spans:",
    `A: ${spreadText(r.spread_a)}`,
    `B: ${spreadText(r.spread_b)}`,
  ].join("\n");
}

const STATUS_TEXT: Record<DiffStatus, string> = { both: "both", added: "added", removed: "removed" };
const STATUS_TITLE: Record<DiffStatus, string> = {
  both: "On both sides",
  added: "Only in B (compare): added",
  removed: "Only in A (baseline): removed",
};

export function statusTag(status: DiffStatus): HTMLElement {
  return h("span", { class: `tag diff-status diff-status-${status}`, text: STATUS_TEXT[status] ?? status, title: STATUS_TITLE[status] });
}
