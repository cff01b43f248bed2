// A server-paged, server-sorted Tabulator table for the Tensor shapes tab. Cells are DOM nodes built by each
// column's `render` (text through textContent), never HTML strings.
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
import type { Order } from "../api";
import { h } from "../dom";
import type { Page } from "./shapesApi";
import { emptyState } from "./states";

Tabulator.registerModule([AjaxModule, FormatModule, InteractionModule, PageModule, ResizeColumnsModule, ResizeTableModule, SortModule]);

export interface ShapesColumn<T> {
  field: string;
  title: string;
  tip: string;
  render(row: T): HTMLElement;
  width?: number;
  grow?: number;
  right?: boolean;
  /** Text columns sort ascending on the first click, numbers descending. */
  text?: boolean;
}

export interface ShapesTableOptions<T> {
  columns: ShapesColumn<T>[];
  sort: string;
  order: Order;
  pageSize: number;
  noun: string;
  fetchPage(sort: string, order: Order, offset: number, limit: number): Promise<Page<T>>;
  onError(message: string): void;
  onClick?(row: T): void;
  key?(row: T): string;
}

interface Params {
  page?: number;
  size?: number;
  sort?: { field: string; dir: "asc" | "desc" }[];
}

function toColumn<T>(c: ShapesColumn<T>): ColumnDefinition {
  // Tabulator reads a present-but-undefined width as a width: set only the sizing keys that have values.
  const size: Partial<ColumnDefinition> = c.grow ? { minWidth: 160, widthGrow: c.grow } : { width: c.width };
  return {
    ...size,
    title: c.title,
    field: c.field,
    hozAlign: c.right ? "right" : "left",
    headerSortStartingDir: c.text ? "asc" : "desc",
    titleFormatter: () => h("span", { text: c.title, title: c.tip }),
    formatter: (cell: CellComponent) => c.render(cell.getRow().getData() as T),
  };
}

export class ShapesTable<T> {
  private table: Tabulator;
  private built: Promise<void>;
  private selected: string | null = null;
  private destroyed = false;

  constructor(container: HTMLElement, private opts: ShapesTableOptions<T>) {
    const el = h("div");
    container.appendChild(el);
    this.table = new Tabulator(el, {
      layout: "fitColumns",
      maxHeight: "520px",
      columns: opts.columns.map(toColumn),
      columnDefaults: { resizable: true, vertAlign: "middle" },
      sortMode: "remote",
      initialSort: [{ column: opts.sort, dir: opts.order }],
      pagination: true,
      paginationMode: "remote",
      paginationSize: opts.pageSize,
      paginationCounter: "rows",
      paginationButtonCount: 5,
      ajaxURL: opts.noun,
      ajaxRequestFunc: (_url: string, _config: unknown, params: Params) => this.request(params),
      placeholder: () => emptyState(`No ${opts.noun}`, "Nothing matches the current filter."),
      rowFormatter: (row: RowComponent) => this.mark(row),
    });
    this.built = new Promise((resolve) =>
      this.table.on("tableBuilt", () => {
        this.table.on("rowClick", (_e: UIEvent, row: RowComponent) => this.click(row.getData() as T));
        resolve();
      }),
    );
  }

  private async request(params: Params): Promise<{ last_page: number; last_row: number; data: T[] }> {
    const size = params.size ?? this.opts.pageSize;
    const sorter = params.sort?.[0];
    try {
      const page = await this.opts.fetchPage(sorter?.field ?? this.opts.sort, sorter?.dir ?? this.opts.order, ((params.page ?? 1) - 1) * size, size);
      return { last_page: Math.max(1, Math.ceil(page.total / size)), last_row: page.total, data: page.rows };
    } catch (err) {
      if (!this.destroyed) this.opts.onError(err instanceof Error ? err.message : String(err));
      return { last_page: 1, last_row: 0, data: [] };
    }
  }

  private click(row: T): void {
    if (!this.opts.onClick || !this.opts.key) return;
    this.select(this.opts.key(row));
    this.opts.onClick(row);
  }

  private mark(row: RowComponent): void {
    const key = this.opts.key?.(row.getData() as T);
    row.getElement().classList.toggle("row-selected", key !== undefined && key === this.selected);
  }

  /** Highlight the row with this key (null: none). */
  select(key: string | null): void {
    this.selected = key;
    if (!this.destroyed) for (const row of this.table.getRows()) this.mark(row);
  }

  /** Fetch again from the first page (after a filter change). */
  async reload(): Promise<void> {
    await this.built;
    if (!this.destroyed) await this.table.setData();
  }

  destroy(): void {
    this.destroyed = true;
    this.table.destroy();
  }
}
