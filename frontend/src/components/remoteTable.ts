// The Tabulator set-up shared by every table of the plugin: remote (server-side) sorting and pagination, an empty
// state, a loading text, and a highlighted row that follows clicks. Each table keeps its own columns and maps the
// page request onto its own route. Importing this module registers the Tabulator modules the tables need, once.
import {
  AjaxModule,
  DownloadModule,
  ExportModule,
  FormatModule,
  FrozenColumnsModule,
  InteractionModule,
  PageModule,
  ResizeColumnsModule,
  ResizeTableModule,
  SortModule,
  Tabulator,
  type ColumnDefinition,
  type RowComponent,
} from "tabulator-tables";
import type { Order } from "../api";
import { h, keepClear } from "../dom";
import { exportName, tableExportButtons } from "../export";
import { emptyState } from "./states";

// prettier-ignore
Tabulator.registerModule([AjaxModule, DownloadModule, ExportModule, FormatModule, FrozenColumnsModule, InteractionModule, PageModule, ResizeColumnsModule, ResizeTableModule, SortModule]);

export interface RemoteSort {
  field: string;
  dir: Order;
}

/** One page asked for by the table: its first column sort (none when the sort was cleared), offset and size. */
export interface RemoteRequest {
  sorter: RemoteSort | undefined;
  offset: number;
  limit: number;
}

export interface RemotePage<T> {
  total: number;
  rows: T[];
}

export interface RemoteTableOptions<T, P extends RemotePage<T>> {
  columns: ColumnDefinition[];
  pageSize: number;
  /** Name of the route, passed to Tabulator as its ajaxURL (the fetch itself is `fetchPage`). */
  route: string;
  fetchPage(req: RemoteRequest): Promise<P>;
  /** Called with each page fetched, unless the table was destroyed meanwhile. */
  onLoaded?(page: P, req: RemoteRequest): void;
  /** Called when a fetch fails, unless the table was destroyed meanwhile; the page shows no rows. */
  onError(err: unknown): void;
  /** The empty state shown when a page has no rows. */
  placeholder: { title: string; hint: string };
  /** Shown (in the plugin's own style, over the rows) while a page loads. */
  loading?: string;
  initialSort?: RemoteSort;
  /** The page shown first (1-based; a deep link's page). */
  initialPage?: number;
  maxHeight: string;
  /** Key of a row, to highlight the selected one. */
  key?(row: T): string;
  /** A click on a row selects it (with `key`) and calls this. */
  onRowClick?(row: T): void;
}

interface TabulatorParams {
  page?: number;
  size?: number;
  sort?: { field: string; dir: Order }[];
}

interface TabulatorPage<T> {
  last_page: number;
  last_row: number;
  data: T[];
}

export class RemoteTable<T, P extends RemotePage<T> = RemotePage<T>> {
  private table: Tabulator;
  private built: Promise<void>;
  private pageSize: number;
  private selected: string | null = null;
  private destroyed = false;
  private busy: HTMLElement;
  private pending = 0;

  constructor(
    container: HTMLElement,
    private opts: RemoteTableOptions<T, P>,
  ) {
    this.pageSize = opts.pageSize;
    // Tabulator turns the element it is given into the table: give it a child so that styles can scope by host.
    const el = h("div");
    // The plugin's loading line over the table instead of Tabulator's grey full-table overlay.
    this.busy = h("div", { class: "table-busy", attrs: { role: "status", "aria-live": "polite" } },
      h("span", { class: "spinner", attrs: { "aria-hidden": "true" } }),
      h("span", { text: opts.loading ?? "Loading…" }));
    this.busy.hidden = true;
    container.classList.add("remote-table");
    container.append(this.busy, el);
    this.table = new Tabulator(el, {
      layout: "fitColumns",
      maxHeight: opts.maxHeight,
      // Downloads name each column by its title and the field its raw values come from (units live in the field).
      columns: opts.columns.map((c) => ({ ...(c.field ? { titleDownload: `${c.title} (${c.field})` } : {}), ...c })),
      // Resize from the header only: handles in every row would swallow clicks meant for the row.
      columnDefaults: { headerSortStartingDir: "desc", resizable: "header", vertAlign: "middle" },
      sortMode: "remote",
      // Tabulator reads a present-but-undefined option as set: add the optional ones only when given.
      ...(opts.initialSort ? { initialSort: [{ column: opts.initialSort.field, dir: opts.initialSort.dir }] } : {}),
      pagination: true,
      paginationMode: "remote",
      paginationSize: opts.pageSize,
      ...(opts.initialPage && opts.initialPage > 1 ? { paginationInitialPage: opts.initialPage } : {}),
      paginationCounter: "rows",
      paginationButtonCount: 5,
      ajaxURL: opts.route,
      ajaxRequestFunc: (_url: string, _config: unknown, params: TabulatorParams) => this.request(params),
      placeholder: () => emptyState(opts.placeholder.title, opts.placeholder.hint),
      dataLoader: false,
      footerElement: tableExportButtons((type) => this.download(type)),
      rowFormatter: (row: RowComponent) => this.mark(row),
    });
    this.built = new Promise((resolve) =>
      this.table.on("tableBuilt", () => {
        // Interaction events bound before the table is built are not always wired up: bind them here.
        this.table.on("rowClick", (_e: UIEvent, row: RowComponent) => this.click(row.getData() as T));
        resolve();
      }),
    );
  }

  private async request(params: TabulatorParams): Promise<TabulatorPage<T>> {
    const size = params.size ?? this.pageSize;
    const page = params.page ?? 1;
    const req: RemoteRequest = { sorter: params.sort?.[0], offset: (page - 1) * size, limit: size };
    this.setBusy(+1);
    try {
      const res = await this.opts.fetchPage(req);
      if (!this.destroyed) this.opts.onLoaded?.(res, req);
      return { last_page: Math.max(1, Math.ceil(res.total / size)), last_row: res.total, data: res.rows };
    } catch (err) {
      if (!this.destroyed) this.opts.onError(err);
      return { last_page: 1, last_row: 0, data: [] };
    } finally {
      this.setBusy(-1);
    }
  }

  private setBusy(delta: number): void {
    this.pending += delta;
    this.busy.hidden = this.pending <= 0;
  }

  /** Download the rows shown (this page, in its sort order, filters applied) through Tabulator's download module. */
  download(type: "csv" | "json"): void {
    if (!this.destroyed) this.table.download(type, exportName(this.opts.route.replace(/\//g, "-"), type), {}, "active");
  }

  private click(row: T): void {
    if (!this.opts.onRowClick || !this.opts.key) return;
    this.select(this.opts.key(row));
    this.opts.onRowClick(row);
  }

  private mark(row: RowComponent): void {
    const key = this.opts.key?.(row.getData() as T);
    row.getElement().classList.toggle("row-selected", key !== undefined && key === this.selected);
  }

  /** Run `fn` on the table once it is built, unless it was destroyed meanwhile. */
  async whenBuilt(fn: (table: Tabulator) => void | Promise<void>): Promise<void> {
    await this.built;
    if (!this.destroyed) await fn(this.table);
  }

  /** Fetch again from the first page (after a change of a filter or of what the rows depend on). */
  reload(): Promise<void> {
    return this.whenBuilt((table) => table.setData());
  }

  setPageSize(size: number): Promise<void> {
    this.pageSize = size;
    return this.whenBuilt((table) => {
      table.setPageSize(size);
    });
  }

  /** Highlight the row with this key (null: none); with `avoid`, scroll it into view clear of that element. */
  select(key: string | null, avoid?: HTMLElement): void {
    this.selected = key;
    if (this.destroyed) return;
    for (const row of this.table.getRows()) this.mark(row);
    if (key === null || !avoid) return;
    const row = this.table.getRows().find((r) => this.opts.key?.(r.getData() as T) === key);
    if (!row) return;
    // After the drawer is laid out: first within the table's own scroll, then the page.
    requestAnimationFrame(() => {
      if (this.destroyed) return;
      const cover = avoid;
      void this.table
        .scrollToRow(row, "nearest", false)
        .catch(() => undefined)
        .then(() => keepClear(row.getElement(), cover));
    });
  }

  destroy(): void {
    this.destroyed = true;
    this.table.destroy();
  }
}

/** The message of a failed fetch, for the UI. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
