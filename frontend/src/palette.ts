// One palette per category, shared by every tab (and so by the PNGs they export, which are the charts' own
// pixels): kernel class, GPU idle cause, critical-path cause, rank. Colours come from colour-blind safe qualitative
// sets (Okabe & Ito 2008; Paul Tol's "muted", "bright" and "light" schemes), assigned so that the colours drawn
// together stay apart for normal, deuteranopic and protanopic vision: kernel classes with idle causes (the
// Overview stacks them in one bar) differ by CIE76 dE >= 14 under Machado et al.'s (2009) simulation, the first 16
// rank colours by >= 11.9. tests/test_palette.py checks both from this file.

/** Kernel classes (analysis/kernel_names.py CLASSES) and the CPU-op lanes of the Timeline. */
export const KERNEL_CLASS_COLORS: Readonly<Record<string, string>> = {
  GEMM: "#0072B2",
  attention: "#332288",
  conv: "#56B4E9",
  elementwise: "#009E73",
  reduction: "#117733",
  norm: "#EEDD88",
  communication: "#CC79A7",
  memcpy: "#882255",
  memset: "#99DDFF",
  other: "#663333",
  // CPU ops are drawn in their own lanes, never beside a kernel class: kept out of the distinctness check.
  "CPU op": "#88CCEE",
};

/** GPU idle causes (the Overview's rules, analysis/overview/breakdown.py keys). */
export const IDLE_CAUSE_COLORS: Readonly<Record<string, string>> = {
  data_loading: "#E69F00",
  sync: "#D55E00",
  launch_bound: "#F0E442",
  host_bound: "#EE6677",
  idle_other: "#BBBBBB",
};

/** The Overview's category keys (analysis/overview/breakdown.py) in the same colours as the classes and causes
 * they stand for ("reduction" there is reduction and norm). */
export const OVERVIEW_COLORS: Readonly<Record<string, string>> = {
  gemm: KERNEL_CLASS_COLORS.GEMM,
  attention: KERNEL_CLASS_COLORS.attention,
  convolution: KERNEL_CLASS_COLORS.conv,
  elementwise: KERNEL_CLASS_COLORS.elementwise,
  reduction: KERNEL_CLASS_COLORS.reduction,
  other_kernels: KERNEL_CLASS_COLORS.other,
  communication: KERNEL_CLASS_COLORS.communication,
  memcpy: KERNEL_CLASS_COLORS.memcpy,
  memset: KERNEL_CLASS_COLORS.memset,
  ...IDLE_CAUSE_COLORS,
  // A CPU-only run's split (analysis/overview/cpu.py), drawn without the GPU categories.
  cpu_data_loading: IDLE_CAUSE_COLORS.data_loading,
  cpu_ops: KERNEL_CLASS_COLORS["CPU op"],
  cpu_collectives: KERNEL_CLASS_COLORS.communication,
  cpu_idle: IDLE_CAUSE_COLORS.idle_other,
};

/** Critical-path causes (analysis/cpath.py), each in the colour of what it is elsewhere. */
export const PATH_CAUSE_COLORS: Readonly<Record<string, string>> = {
  cpu_op: "#999933",
  kernel: KERNEL_CLASS_COLORS.GEMM,
  launch: IDLE_CAUSE_COLORS.launch_bound,
  sync_wait: IDLE_CAUSE_COLORS.sync,
  communication: KERNEL_CLASS_COLORS.communication,
  idle: IDLE_CAUSE_COLORS.idle_other,
};

/** Ranks: Okabe & Ito's seven colours, extended from Tol's schemes by a greedy farthest pick (16 in all). */
export const RANK_COLORS: readonly string[] = [
  "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#332288",
  "#117733", "#DDCC77", "#882255", "#FFAABB", "#99DDFF", "#EE6677", "#999933", "#44BB99",
];

/** A rank's colour (ranks past 16 reuse the list). */
export function rankColor(rank: number): string {
  const n = RANK_COLORS.length;
  return RANK_COLORS[((Math.trunc(rank) % n) + n) % n];
}

/** A fallback for a key no palette knows (a class added on the server before the browser knows it). */
export const UNKNOWN_COLOR = "#AAAAAA";

/** `#rrggbb` with an alpha, for shading. */
export function withAlpha(hex: string, alpha: number): string {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}
