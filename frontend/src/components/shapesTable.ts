// A server-paged, server-sorted Tabulator table for the Tensor shapes tab (see remoteTable.ts). Cells are DOM nodes
// built by each column's `render` (text through textContent), never HTML strings.
import type { CellComponent, ColumnDefinition } from "tabulator-tables";
import type { Order } from "../api";
import { h } from "../dom";
import { errorMessage, RemoteTable } from "./remoteTable";
import type { Page } from "../views/shapes/api";

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

export function toColumn<T>(c: ShapesColumn<T>): ColumnDefinition {
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
  private table: RemoteTable<T, Page<T>>;

  constructor(container: HTMLElement, opts: ShapesTableOptions<T>) {
    this.table = new RemoteTable<T, Page<T>>(container, {
      columns: opts.columns.map(toColumn),
      pageSize: opts.pageSize,
      route: opts.noun,
      fetchPage: ({ sorter, offset, limit }) => opts.fetchPage(sorter?.field ?? opts.sort, sorter?.dir ?? opts.order, offset, limit),
      onError: (err) => opts.onError(errorMessage(err)),
      placeholder: { title: `No ${opts.noun}`, hint: "Nothing matches the current filter." },
      initialSort: { field: opts.sort, dir: opts.order },
      maxHeight: "520px",
      key: opts.key,
      onRowClick: opts.onClick,
    });
  }

  /** Highlight the row with this key (null: none). */
  select(key: string | null): void {
    this.table.select(key);
  }

  /** Fetch again from the first page (after a filter change). */
  reload(): Promise<void> {
    return this.table.reload();
  }

  destroy(): void {
    this.table.destroy();
  }
}
