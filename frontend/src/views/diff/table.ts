// The Diff table: one row per kernel (or op + shapes) with both sides' figures and the deltas, in Tabulator with
// remote (server-side) sorting and pagination (see remoteTable.ts). Cells are DOM nodes filled through textContent
// (see kernelTable.ts).
import type { CellComponent, ColumnDefinition } from "tabulator-tables";
import { isAbort, type DiffBy, type DiffResponse, type DiffRow, type DiffSort, type Order } from "../../api";
import { h } from "../../dom";
import { count, isKnown, pct, sig, time } from "../../format";
import { deltaClass, noiseTitle, signedPct, signedTime, spreadText, statusTag } from "./format";
import { cellText, pctBar, unknown } from "../../components/kernelTable";
import { errorMessage, RemoteTable, type RemoteSort } from "../../components/remoteTable";

export interface DiffPageRequest {
  sort: DiffSort;
  order: Order;
  offset: number;
  limit: number;
}

export interface DiffTableOptions {
  pageSize: number;
  /** Rows per kernel or per op + shapes: in op mode Calls are op calls and launches get their own column. */
  by: DiffBy;
  /** Some side has several spans: the Noise column has something to say. */
  noise: boolean;
  /** Fetch one page; the caller adds the two sides and the filters. */
  fetchPage(req: DiffPageRequest): Promise<DiffResponse>;
  onLoaded(res: DiffResponse, sort: DiffSort): void;
  onSelect(row: DiffRow): void;
  onError(message: string): void;
}

const SORTABLE: ReadonlySet<string> = new Set(["name", "class", "status", "time_us_a", "time_us_b", "delta_us", "delta_pct"]);

type Formatter = (row: DiffRow) => HTMLElement;

/** A fractional count (calls per span, averaged over spans) with at most one decimal. */
function calls(v: number | null): string {
  if (!isKnown(v)) return "";
  return Number.isInteger(v) ? count(v) : sig(v);
}

/** No column sort: by impact on total GPU time (|Δ time|), the most telling order. */
function diffSort(sorter: RemoteSort | undefined): DiffSort {
  return sorter && SORTABLE.has(sorter.field) ? (sorter.field as DiffSort) : "impact";
}

function sideMissing(r: DiffRow, side: "a" | "b"): boolean {
  return (side === "a" && r.status === "added") || (side === "b" && r.status === "removed");
}

export class DiffTable {
  private table: RemoteTable<DiffRow, DiffResponse>;

  constructor(container: HTMLElement, opts: DiffTableOptions) {
    const fmt = (f: Formatter) => (cell: CellComponent) => f(cell.getRow().getData() as DiffRow);
    const header = (title: string, tip: string) => () => h("span", { text: title, title: tip });
    const absent = (side: "a" | "b") => h("span", { class: "cell-absent", text: "", title: side === "a" ? "not in A" : "not in B" });
    /** A per-side cell: blank when the row is not on that side, "—" with a reason when the value is unknown. */
    const sideCell = (side: "a" | "b", value: (r: DiffRow) => number | null, show: (v: number, r: DiffRow) => HTMLElement, why: string) =>
      fmt((r) => {
        if (sideMissing(r, side)) return absent(side);
        const v = value(r);
        return v == null ? unknown(why) : show(v, r);
      });
    const pair = (
      title: string,
      tip: string,
      key: "count" | "launches" | "time_us" | "tflops" | "pct_peak",
      width: number,
      show: (v: number, r: DiffRow, side: "a" | "b") => HTMLElement,
      why: string,
      sortable: boolean,
    ): ColumnDefinition => ({
      title,
      titleFormatter: header(title, tip),
      columns: (["a", "b"] as const).map((side) => ({
        title: side.toUpperCase(),
        field: `${key}_${side}`,
        width,
        hozAlign: key === "pct_peak" ? "left" : "right",
        headerSort: sortable,
        titleFormatter: header(side.toUpperCase(), `${tip}: ${side === "a" ? "baseline (A)" : "compare (B)"}`),
        formatter: sideCell(side, (r) => r[`${key}_${side}`] ?? null, (v, r) => show(v, r, side), why),
      })),
    });

    const columns: ColumnDefinition[] = [
      {
        title: "Name",
        field: "name",
        minWidth: opts.by === "op" ? 180 : 240,
        widthGrow: 4,
        headerSortStartingDir: "asc",
        titleFormatter: header("Name", "Kernel name (or launching op with its input shapes), as matched across the two sides; hover for the full name"),
        formatter: fmt((r) => cellText(r.display_name ?? r.name, r.demangled ?? r.name, "cell-text cell-name")),
      },
      {
        title: "Class",
        field: "class",
        width: 94,
        headerSortStartingDir: "asc",
        titleFormatter: header("Class", "Kernel class: GEMM, attention, conv, elementwise, reduction, norm, communication, memcpy, memset, other"),
        formatter: fmt((r) => cellText(r.class)),
      },
      {
        title: "Status",
        field: "status",
        width: 80,
        headerSortStartingDir: "asc",
        titleFormatter: header("Status", "both sides, added (only in B) or removed (only in A)"),
        formatter: fmt((r) => statusTag(r.status)),
      },
      ...(opts.by === "op"
        ? [
            pair("Calls", "Op calls per span (one call may launch several kernels)", "count", 54, (v) => cellText(calls(v)), "no launching op", false),
            {
              title: "Launches",
              field: "launches_b",
              width: 88,
              hozAlign: "right",
              headerSort: false,
              titleFormatter: header("Launches", "Kernel launches per span, A → B (an op call may launch several kernels)"),
              formatter: fmt((r) => cellText(`${calls(r.launches_a ?? null) || "–"} → ${calls(r.launches_b ?? null) || "–"}`)),
            } as ColumnDefinition,
          ]
        : [pair("Launches", "Kernel launches per span", "count", 70, (v) => cellText(calls(v)), "unknown", false)]),
      pair("Time", "GPU time per span", "time_us", 80, (v, r, side) => cellText(time(v), spreadText(side === "a" ? r.spread_a : r.spread_b)), "unknown", true),
      {
        title: "Δ time",
        field: "delta_us",
        width: 90,
        hozAlign: "right",
        titleFormatter: header("Δ time", "B − A per span: green is faster in B, red is slower"),
        formatter: fmt((r) =>
          r.delta_us == null
            ? unknown("unknown")
            : h("span", { class: "cell-text " + deltaClass(r.delta_us, r.time_us_a), text: signedTime(r.delta_us) }),
        ),
      },
      {
        title: "Δ %",
        field: "delta_pct",
        width: 80,
        hozAlign: "right",
        titleFormatter: header("Δ %", "(B − A) / A"),
        formatter: fmt((r) =>
          r.delta_pct == null
            ? unknown(r.status === "both" ? "unknown" : `${r.status}: no relative change`)
            : h("span", { class: "cell-text " + deltaClass(r.delta_us, r.time_us_a), text: signedPct(r.delta_pct) }),
        ),
      },
      pair("TFLOP/s", "Achieved TFLOP/s", "tflops", 62, (v) => cellText(sig(v)), "no FLOP estimate for this kernel", false),
      pair(
        "% of peak",
        "Achieved TFLOP/s as a share of the datasheet peak for the kernel's dtype",
        "pct_peak",
        96,
        (v, r, side) => pctBar(v, "pbar-compute", `${pct(v)} of ${(side === "a" ? r.dtype_a : r.dtype_b) ?? ""} peak`),
        "no FLOP estimate or no datasheet peak",
        false,
      ),
    ];
    if (opts.noise) {
      columns.push(
        {
          title: "Noise",
          field: "within_noise",
          width: 62,
          hozAlign: "center",
          headerSort: false,
          titleFormatter: header("Noise", "≈: the change is within the spread between spans (hover for the spreads)"),
          formatter: fmt((r) =>
            r.within_noise === true
              ? h("span", { class: "noise-mark", text: "≈", title: noiseTitle(r) })
              : r.within_noise === false
                ? h("span", { class: "muted", text: "", title: "The change is larger than the spread between spans" })
                : h("span", { class: "cell-unknown", text: "", title: "No spread: a side has a single span" }),
          ),
        },
      );
    }

    this.table = new RemoteTable<DiffRow, DiffResponse>(container, {
      columns,
      pageSize: opts.pageSize,
      route: "diff",
      fetchPage: ({ sorter, offset, limit }) =>
        opts.fetchPage({ sort: diffSort(sorter), order: sorter?.dir === "asc" ? "asc" : "desc", offset, limit }),
      onLoaded: (res, req) => opts.onLoaded(res, diffSort(req.sorter)),
      onError: (err) => {
        if (!isAbort(err)) opts.onError(errorMessage(err));
      },
      placeholder: { title: "No rows", hint: "No kernel matches the current name and status filters." },
      loading: "Comparing…",
      maxHeight: "620px",
      key: (row) => row.name,
      onRowClick: (row) => opts.onSelect(row),
    });
  }

  /** Fetch again from the first page (after a change of a filter). */
  reload(): Promise<void> {
    return this.table.reload();
  }

  /** Back to the default order (impact), then fetch again. */
  sortByImpact(): Promise<void> {
    return this.table.whenBuilt(async (table) => {
      table.clearSort();
      await table.setData();
    });
  }

  select(name: string | null): void {
    this.table.select(name);
  }

  destroy(): void {
    this.table.destroy();
  }
}
