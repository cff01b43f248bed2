// The kernel table: Tabulator with remote (server-side) sorting and pagination (see remoteTable.ts).
// Every cell is built by a formatter that returns a DOM node filled through textContent (Tabulator would otherwise
// write the raw value with innerHTML).
import type { CellComponent, ColumnDefinition } from "tabulator-tables";
import type { Group, KernelRow, KernelsResponse, Order } from "../api";
import { h, middleEllipsis } from "../dom";
import { BOUND_HELP, boundLabel, COMM_HELP, count, gbps, occupancy, pct, sig, time, UNKNOWN } from "../format";
import { errorMessage, RemoteTable } from "./remoteTable";

export interface PageRequest {
  sort: string;
  order: Order;
  offset: number;
  limit: number;
}

export interface KernelTableOptions {
  pageSize: number;
  group: Group;
  /** Fetch one page; the caller adds the run, device, dtype, group and filters. */
  fetchPage(req: PageRequest): Promise<KernelsResponse>;
  /** Whether the device has a datasheet match (to explain unknown percentages). */
  deviceMatched(): boolean;
  onSelect(row: KernelRow): void;
  onLoaded(total: number, dtype: string): void;
  /** The rows of the page now shown. */
  onRows(rows: KernelRow[]): void;
  onError(message: string): void;
  /** "All ranks": rows span every rank's GPU; show each row's spread over the ranks. */
  rankSpread?: boolean;
  /** The sort and page shown first (a deep link's); by default the most total time first, page 1. */
  initialSort?: { field: string; dir: Order };
  initialPage?: number;
}

type Formatter = (row: KernelRow) => HTMLElement;

/** The name a table or chart shows for a kernel: the server's short display name, else the raw name. */
export function shownName(r: { name: string; display_name?: string | null }): string {
  return r.display_name || r.name;
}

/** Copy transfers (memcpy / memset) have no data type of their own. */
export function isTransfer(r: { name: string; kernel_class?: string | null }): boolean {
  if (r.kernel_class) return r.kernel_class === "memcpy" || r.kernel_class === "memset";
  return /^(memcpy|memset)\b/i.test(r.name);
}

/** The kernel name cell: middle ellipsis over the short name, the raw (and demangled) name on hover. */
export function kernelNameCell(r: KernelRow): HTMLElement {
  const full = r.demangled && r.demangled !== r.name ? `${r.demangled}\n\n${r.name}` : r.name;
  const mark = roofMark(r);
  const name = middleEllipsis(shownName(r), full, "cell-name");
  return mark ? h("span", { class: "cell-with-mark" }, mark, name) : name;
}

/** The roofline-side tag of a row ("communication" for a collective); "—" when FLOPs or bytes are unknown. */
export function boundTag(r: KernelRow): HTMLElement {
  const label = boundLabel(r.bound);
  if (!label) return unknown("FLOPs or bytes unknown: no roofline side");
  const why = r.bound === "communication" ? COMM_HELP
    : `${label}${r.intensity != null ? ` at ${sig(r.intensity)} FLOP/B` : ""}. ${BOUND_HELP}`;
  return h("span", { class: `tag tag-${r.bound}`, text: label.replace(/ \(.*/, ""), title: why });
}

export function cellText(text: string, title?: string, cls = "cell-text"): HTMLElement {
  return h("span", { class: cls, text, title });
}

export function unknown(reason: string): HTMLElement {
  return h("span", { class: "cell-unknown", text: UNKNOWN, title: reason });
}

function flopReason(row: KernelRow): string {
  return row.flops_reason || "no FLOP estimate for this kernel";
}

function byteReason(row: KernelRow): string {
  return row.bytes_reason || "no byte estimate for this kernel";
}

/** Registers and launch configuration, for a tooltip. */
export function launchText(r: KernelRow): string {
  const parts = [];
  if (r.registers != null) parts.push(`${r.registers} registers/thread`);
  if (r.grid) parts.push(`grid ${r.grid.replace(/\s+/g, "")}`);
  if (r.block) parts.push(`block ${r.block.replace(/\s+/g, "")}`);
  return parts.join(" · ");
}

/** The warning mark of a row whose figures are over the physical roof (the estimate, not the GPU, is wrong). */
export function roofMark(r: { over_roof?: boolean; roof_cause?: string | null }): HTMLElement | null {
  if (!r.over_roof) return null;
  const why = `over the roof: impossible figures, left out of the device's efficiency${r.roof_cause ? ` (likely cause: ${r.roof_cause})` : ""}`;
  return h("span", { class: "roof-mark", text: "⚠", title: why, attrs: { "aria-label": why } });
}

export function pctBar(frac: number, cls: string, title: string): HTMLElement {
  const width = Math.max(0, Math.min(1, frac)) * 100;
  return h(
    "div",
    { class: `pbar ${cls}${frac > 1 ? " pbar-over" : ""}`, title },
    h("div", { class: "pbar-track" }, h("div", { class: "pbar-fill", style: { width: `${width.toFixed(1)}%` } })),
    h("span", { class: "pbar-text", text: pct(frac) }),
  );
}

/** "All ranks" columns: on how many ranks a kernel ran and its time per rank (min / median / max). */
function rankSpreadColumns(
  fmt: (f: Formatter) => (cell: CellComponent) => HTMLElement,
  header: (title: string, tip: string) => () => HTMLElement,
): ColumnDefinition[] {
  const perRank = (field: "rank_min_us" | "rank_median_us" | "rank_max_us", title: string, tip: string): ColumnDefinition => ({
    title,
    field,
    width: 112,
    hozAlign: "right",
    cssClass: "col-rank-spread",
    titleFormatter: header(title, `${tip} time of the kernel on one rank (0 on a rank where it did not run)`),
    formatter: fmt((r) => cellText(time(r[field] ?? null))),
  });
  return [
    {
      title: "Ranks",
      field: "ranks",
      width: 80,
      hozAlign: "right",
      cssClass: "col-rank-spread",
      titleFormatter: header("Ranks", "How many of the selection's ranks the kernel ran on"),
      formatter: fmt((r) => cellText(count(r.ranks ?? 0))),
    },
    perRank("rank_min_us", "Min/rank", "Smallest"),
    perRank("rank_median_us", "Med./rank", "Median"),
    perRank("rank_max_us", "Max/rank", "Largest"),
  ];
}

export class KernelTable {
  private table: RemoteTable<KernelRow, KernelsResponse>;

  constructor(
    container: HTMLElement,
    private opts: KernelTableOptions,
  ) {
    const matched = () => opts.deviceMatched();
    const peakReason = (row: KernelRow) =>
      row.flops == null
        ? flopReason(row)
        : !matched()
          ? "unknown device: efficiency unknown"
          : `no ${row.dtype ?? "dtype"} peak on this device's datasheet`;
    const dramReason = (row: KernelRow) =>
      row.bytes == null ? byteReason(row) : !matched() ? "unknown device: efficiency unknown" : "no DRAM bandwidth on the datasheet";

    const fmt = (f: Formatter) => (cell: CellComponent) => f(cell.getRow().getData() as KernelRow);
    const header = (title: string, tip: string) => () => h("span", { text: title, title: tip });

    const columns: ColumnDefinition[] = [
      {
        title: "Kernel",
        field: "name",
        minWidth: 220,
        widthGrow: 4,
        frozen: true,
        headerSortStartingDir: "asc",
        titleFormatter: header("Kernel", "Short kernel name (hover for the full, demangled and raw name)"),
        formatter: fmt(kernelNameCell),
      },
      {
        title: "Class",
        field: "kernel_class",
        width: 86,
        headerSort: false,
        titleFormatter: header("Class", "Kernel class from its name: GEMM, attention, conv, elementwise, reduction, norm, communication, memcpy, memset, other"),
        formatter: fmt((r) => (r.kernel_class ? cellText(r.kernel_class) : unknown("not classified by this server"))),
      },
      {
        title: "Fused from",
        field: "fused_from",
        minWidth: 120,
        widthGrow: 1,
        visible: false, // shown once a page holds an Inductor kernel (see `onLoaded`)
        headerSort: false,
        titleFormatter: header("Fused from", "The ops Inductor fused into this kernel (from its name); the class says what the kernel does"),
        formatter: fmt((r) => (r.fused_from ? cellText(r.fused_from) : h("span", { text: "" }))),
      },
      {
        title: "Op",
        field: "op",
        minWidth: 150,
        widthGrow: 1,
        visible: opts.group === "op",
        headerSortStartingDir: "asc",
        titleFormatter: header("Op", "CPU op that launched the kernel"),
        formatter: fmt((r) => (r.op ? cellText(r.op, r.op, "cell-text cell-op") : unknown("no launching op found"))),
      },
      {
        title: "Calls",
        field: "count",
        width: 54,
        hozAlign: "right",
        titleFormatter: header("Calls", "Number of launches"),
        formatter: fmt((r) => cellText(count(r.count))),
      },
      {
        title: "Total",
        field: "total_us",
        width: 68,
        hozAlign: "right",
        titleFormatter: header("Total", "Total GPU time of all launches"),
        formatter: fmt((r) => cellText(time(r.total_us))),
      },
      {
        title: "Mean",
        field: "mean_us",
        width: 68,
        hozAlign: "right",
        titleFormatter: header("Mean", "Mean time per launch (hover a cell for min and max)"),
        formatter: fmt((r) => cellText(time(r.mean_us), `min ${time(r.min_us)} · max ${time(r.max_us)}`)),
      },
      {
        title: "Share",
        field: "time_share",
        width: 60,
        hozAlign: "right",
        titleFormatter: header("Share", "Share of the device's kernel time"),
        formatter: fmt((r) => cellText(pct(r.time_share))),
      },
      ...(opts.rankSpread ? rankSpreadColumns(fmt, header) : []),
      {
        title: "TFLOP/s",
        field: "tflops",
        width: 68,
        hozAlign: "right",
        titleFormatter: header("TFLOP/s", "Achieved TFLOP/s: estimated FLOPs / kernel time"),
        formatter: fmt((r) => (r.tflops == null ? unknown(flopReason(r)) : cellText(sig(r.tflops)))),
      },
      {
        title: "% peak",
        field: "pct_peak",
        width: 90,
        titleFormatter: header("% peak", "Achieved TFLOP/s as a share of the datasheet peak for the kernel's dtype"),
        formatter: fmt((r) =>
          r.pct_peak == null ? unknown(peakReason(r)) : pctBar(r.pct_peak, "pbar-compute", `${pct(r.pct_peak)} of ${r.dtype ?? ""} peak`),
        ),
      },
      {
        title: "GB/s",
        field: "gbps",
        width: 56,
        hozAlign: "right",
        titleFormatter: header("GB/s", "Achieved DRAM bandwidth: estimated bytes / kernel time"),
        formatter: fmt((r) => (r.gbps == null ? unknown(byteReason(r)) : cellText(sig(r.gbps), gbps(r.gbps)))),
      },
      {
        title: "% DRAM",
        field: "pct_dram",
        width: 90,
        titleFormatter: header("% DRAM", "Achieved GB/s as a share of the datasheet DRAM bandwidth"),
        formatter: fmt((r) =>
          r.pct_dram == null ? unknown(dramReason(r)) : pctBar(r.pct_dram, "pbar-memory", `${pct(r.pct_dram)} of DRAM bandwidth`),
        ),
      },
      {
        title: "FLOP/B",
        field: "intensity",
        width: 58,
        hozAlign: "right",
        titleFormatter: header("FLOP/B", "Arithmetic intensity: FLOPs per DRAM byte"),
        formatter: fmt((r) =>
          r.intensity == null ? unknown(r.flops == null ? flopReason(r) : byteReason(r)) : cellText(sig(r.intensity)),
        ),
      },
      {
        title: "Covered",
        field: "covered_share",
        width: 62,
        hozAlign: "right",
        titleFormatter: header("Covered", "Share of the row's time in calls with both a FLOP and a byte estimate; its rates describe those calls"),
        formatter: fmt((r) => (r.covered_share == null ? unknown("no call of this row has both estimates") : cellText(pct(r.covered_share)))),
      },
      {
        title: "Bound",
        field: "bound",
        width: 98,
        headerSortStartingDir: "asc",
        titleFormatter: header("Bound", BOUND_HELP),
        formatter: fmt(boundTag),
      },
      {
        title: "dtype",
        field: "dtype",
        width: 50,
        headerSortStartingDir: "asc",
        titleFormatter: header("dtype", "Data type whose peak the kernel is rated against"),
        formatter: fmt((r) =>
          isTransfer(r) ? cellText("") : r.dtype ? cellText(r.dtype) : unknown("dtype unknown"),
        ),
      },
      {
        title: "Occ.",
        field: "occupancy",
        width: 54,
        hozAlign: "right",
        titleFormatter: header("Occ.", "Estimated achieved occupancy reported by the profiler (hover: registers, grid, block)"),
        formatter: fmt((r) =>
          occupancy(r.occupancy) === UNKNOWN
            ? unknown("not in the trace (the profiler reported no occupancy estimate)")
            : cellText(occupancy(r.occupancy), launchText(r)),
        ),
      },
    ];

    this.table = new RemoteTable<KernelRow, KernelsResponse>(container, {
      columns,
      pageSize: opts.pageSize,
      route: "kernels",
      fetchPage: ({ sorter, offset, limit }) =>
        opts.fetchPage({ sort: sorter?.field ?? "total_us", order: sorter?.dir === "asc" ? "asc" : "desc", offset, limit }),
      onLoaded: (res) => {
        if (res.rows.some((r) => r.fused_from)) void this.table.whenBuilt(async (table) => table.showColumn("fused_from"));
        opts.onLoaded(res.total, res.dtype);
        opts.onRows(res.rows);
      },
      onError: (err) => opts.onError(errorMessage(err)),
      placeholder: { title: "No kernels", hint: "No kernel on this device matches the current filters." },
      loading: "Loading kernels…",
      initialSort: opts.initialSort ?? { field: "total_us", dir: "desc" },
      initialPage: opts.initialPage,
      // Tall: the table is the first thing on the tab and keeps its header in view while its rows scroll.
      maxHeight: "max(320px, calc(100vh - 190px))",
      key: (row) => row.name,
      onRowClick: (row) => opts.onSelect(row),
    });
  }

  /** Fetch again from the first page (after a change of dtype, group, filter or device). */
  reload(): Promise<void> {
    return this.table.reload();
  }

  setPageSize(size: number): Promise<void> {
    this.opts.pageSize = size;
    return this.table.setPageSize(size);
  }

  async setGroup(group: Group): Promise<void> {
    this.opts.group = group;
    await this.table.whenBuilt(async (table) => {
      if (group === "op") table.showColumn("op");
      else table.hideColumn("op");
      await table.setData();
    });
  }

  /** Mark the row of this kernel (null: none) and scroll it into view clear of `avoid` (the details drawer). */
  select(name: string | null, avoid?: HTMLElement): void {
    this.table.select(name, avoid);
  }

  destroy(): void {
    this.table.destroy();
  }
}
