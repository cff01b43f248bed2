// The kernel table: Tabulator with remote (server-side) sorting and pagination.
// Every cell is built by a formatter that returns a DOM node filled through textContent (Tabulator would otherwise
// write the raw value with innerHTML).
import {
  AjaxModule,
  FormatModule,
  InteractionModule,
  PageModule,
  ResizeColumnsModule,
  ResizeTableModule,
  SortModule,
  Tabulator,
  type CellComponent,
  type ColumnDefinition,
  type RowComponent,
} from "tabulator-tables";
import type { Group, KernelRow, KernelsResponse, Order } from "../api";
import { h } from "../dom";
import { count, gbps, pct, sig, time, UNKNOWN } from "../format";
import { emptyState } from "./states";

Tabulator.registerModule([
  AjaxModule,
  FormatModule,
  InteractionModule,
  PageModule,
  ResizeColumnsModule,
  ResizeTableModule,
  SortModule,
]);

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
}

type Formatter = (row: KernelRow) => HTMLElement;

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

export function pctBar(frac: number, cls: string, title: string): HTMLElement {
  const width = Math.max(0, Math.min(1, frac)) * 100;
  return h(
    "div",
    { class: `pbar ${cls}${frac > 1 ? " pbar-over" : ""}`, title },
    h("div", { class: "pbar-track" }, h("div", { class: "pbar-fill", style: { width: `${width.toFixed(1)}%` } })),
    h("span", { class: "pbar-text", text: pct(frac) }),
  );
}

export class KernelTable {
  private table: Tabulator;
  private built: Promise<void>;
  private selectedName: string | null = null;
  private destroyed = false;

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
        minWidth: 280,
        widthGrow: 4,
        headerSortStartingDir: "asc",
        titleFormatter: header("Kernel", "Kernel name as recorded in the trace"),
        formatter: fmt((r) => cellText(r.name, r.name, "cell-text cell-name")),
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
        width: 70,
        hozAlign: "right",
        titleFormatter: header("Calls", "Number of launches"),
        formatter: fmt((r) => cellText(count(r.count))),
      },
      {
        title: "Total",
        field: "total_us",
        width: 80,
        hozAlign: "right",
        titleFormatter: header("Total", "Total GPU time of all launches"),
        formatter: fmt((r) => cellText(time(r.total_us))),
      },
      {
        title: "Mean",
        field: "mean_us",
        width: 80,
        hozAlign: "right",
        titleFormatter: header("Mean", "Mean time per launch (hover a cell for min and max)"),
        formatter: fmt((r) => cellText(time(r.mean_us), `min ${time(r.min_us)} · max ${time(r.max_us)}`)),
      },
      {
        title: "Share",
        field: "time_share",
        width: 78,
        hozAlign: "right",
        titleFormatter: header("Share", "Share of the device's kernel time"),
        formatter: fmt((r) => cellText(pct(r.time_share))),
      },
      {
        title: "TFLOP/s",
        field: "tflops",
        width: 92,
        hozAlign: "right",
        titleFormatter: header("TFLOP/s", "Achieved TFLOP/s: estimated FLOPs / kernel time"),
        formatter: fmt((r) => (r.tflops == null ? unknown(flopReason(r)) : cellText(sig(r.tflops)))),
      },
      {
        title: "% of peak",
        field: "pct_peak",
        width: 116,
        titleFormatter: header("% of peak", "Achieved TFLOP/s as a share of the datasheet peak for the kernel's dtype"),
        formatter: fmt((r) =>
          r.pct_peak == null ? unknown(peakReason(r)) : pctBar(r.pct_peak, "pbar-compute", `${pct(r.pct_peak)} of ${r.dtype ?? ""} peak`),
        ),
      },
      {
        title: "GB/s",
        field: "gbps",
        width: 76,
        hozAlign: "right",
        titleFormatter: header("GB/s", "Achieved DRAM bandwidth: estimated bytes / kernel time"),
        formatter: fmt((r) => (r.gbps == null ? unknown(byteReason(r)) : cellText(sig(r.gbps), gbps(r.gbps)))),
      },
      {
        title: "% of DRAM",
        field: "pct_dram",
        width: 116,
        titleFormatter: header("% of DRAM", "Achieved GB/s as a share of the datasheet DRAM bandwidth"),
        formatter: fmt((r) =>
          r.pct_dram == null ? unknown(dramReason(r)) : pctBar(r.pct_dram, "pbar-memory", `${pct(r.pct_dram)} of DRAM bandwidth`),
        ),
      },
      {
        title: "FLOP/B",
        field: "intensity",
        width: 86,
        hozAlign: "right",
        titleFormatter: header("FLOP/B", "Arithmetic intensity: FLOPs per DRAM byte"),
        formatter: fmt((r) =>
          r.intensity == null ? unknown(r.flops == null ? flopReason(r) : byteReason(r)) : cellText(sig(r.intensity)),
        ),
      },
      {
        title: "Bound",
        field: "bound",
        width: 84,
        headerSortStartingDir: "asc",
        titleFormatter: header("Bound", "Which roof limits the kernel at its intensity (roofline model)"),
        formatter: fmt((r) => h("span", { class: `tag tag-${r.bound}`, text: r.bound })),
      },
      {
        title: "dtype",
        field: "dtype",
        width: 76,
        headerSortStartingDir: "asc",
        titleFormatter: header("dtype", "Data type whose peak the kernel is rated against"),
        formatter: fmt((r) => (r.dtype ? cellText(r.dtype) : unknown("dtype unknown"))),
      },
      {
        title: "Occ.",
        field: "occupancy",
        width: 66,
        hozAlign: "right",
        titleFormatter: header("Occ.", "Estimated achieved occupancy reported by the profiler (hover: registers, grid, block)"),
        formatter: fmt((r) =>
          r.occupancy == null
            ? unknown("not in trace")
            : cellText(`${sig(r.occupancy)} %`, launchText(r)),
        ),
      },
    ];

    // Tabulator turns the element it is given into the table: give it a child so that styles can scope by host.
    const el = h("div");
    container.appendChild(el);
    this.table = new Tabulator(el, {
      layout: "fitColumns",
      maxHeight: "600px",
      columns,
      columnDefaults: { headerSortStartingDir: "desc", resizable: true, vertAlign: "middle" },
      sortMode: "remote",
      initialSort: [{ column: "total_us", dir: "desc" }],
      pagination: true,
      paginationMode: "remote",
      paginationSize: opts.pageSize,
      paginationCounter: "rows",
      paginationButtonCount: 5,
      ajaxURL: "kernels",
      ajaxRequestFunc: (_url: string, _config: unknown, params: TabulatorParams) => this.request(params),
      placeholder: () => emptyState("No kernels", "No kernel on this device matches the current filters."),
      dataLoaderLoading: h("span", { class: "table-loading", text: "Loading kernels…" }),
      rowFormatter: (row: RowComponent) => {
        const data = row.getData() as KernelRow;
        row.getElement().classList.toggle("row-selected", data.name === this.selectedName);
      },
    });
    this.built = new Promise((resolve) =>
      this.table.on("tableBuilt", () => {
        // Interaction events bound before the table is built are not always wired up: bind them here.
        this.table.on("rowClick", (_e: UIEvent, row: RowComponent) => {
          const data = row.getData() as KernelRow;
          this.select(data.name);
          opts.onSelect(data);
        });
        resolve();
      }),
    );
  }

  private async request(params: TabulatorParams): Promise<RemotePage> {
    const size = params.size ?? this.opts.pageSize;
    const page = params.page ?? 1;
    const sorter = params.sort?.[0];
    try {
      const res = await this.opts.fetchPage({
        sort: sorter?.field ?? "total_us",
        order: sorter?.dir === "asc" ? "asc" : "desc",
        offset: (page - 1) * size,
        limit: size,
      });
      if (!this.destroyed) {
        this.opts.onLoaded(res.total, res.dtype);
        this.opts.onRows(res.rows);
      }
      const lastPage = Math.max(1, Math.ceil(res.total / size));
      return { last_page: lastPage, last_row: res.total, data: res.rows };
    } catch (err) {
      if (!this.destroyed) this.opts.onError(err instanceof Error ? err.message : String(err));
      return { last_page: 1, last_row: 0, data: [] };
    }
  }

  /** Fetch again from the first page (after a change of dtype, group, filter or device). */
  async reload(): Promise<void> {
    await this.built;
    if (this.destroyed) return;
    await this.table.setData();
  }

  async setPageSize(size: number): Promise<void> {
    this.opts.pageSize = size;
    await this.built;
    if (this.destroyed) return;
    this.table.setPageSize(size);
  }

  async setGroup(group: Group): Promise<void> {
    this.opts.group = group;
    await this.built;
    if (this.destroyed) return;
    if (group === "op") this.table.showColumn("op");
    else this.table.hideColumn("op");
    await this.table.setData();
  }

  /** Mark the row of this kernel (null: none). */
  select(name: string | null): void {
    this.selectedName = name;
    if (this.destroyed) return;
    for (const row of this.table.getRows()) {
      row.getElement().classList.toggle("row-selected", (row.getData() as KernelRow).name === name);
    }
  }

  destroy(): void {
    this.destroyed = true;
    this.table.destroy();
  }
}

interface TabulatorParams {
  page?: number;
  size?: number;
  sort?: { field: string; dir: "asc" | "desc" }[];
}

interface RemotePage {
  last_page: number;
  last_row: number;
  data: KernelRow[];
}
