// The Tensor shapes tab's tree view: op groups nested parent -> children (Tabulator's data tree), each with its
// total and self device time. The whole tree comes in one answer (the server caps it), so it sorts locally.
import { DataTreeModule, FormatModule, InteractionModule, ResizeColumnsModule, SortModule, Tabulator, type RowComponent } from "tabulator-tables";
import { h } from "../../dom";
import type { OpShapeRow } from "./api";
import { toColumn, type ShapesColumn } from "../../components/shapesTable";
import { emptyState } from "../../components/states";

Tabulator.registerModule([DataTreeModule, FormatModule, InteractionModule, ResizeColumnsModule, SortModule]);

type TreeRow = OpShapeRow & { _children?: TreeRow[] };

/** Rows in tree order (parents first) nested into Tabulator's `_children`. */
export function nest(rows: OpShapeRow[]): TreeRow[] {
  const byId = new Map<string, TreeRow>();
  const roots: TreeRow[] = [];
  for (const row of rows) {
    const node: TreeRow = { ...row };
    byId.set(row.id, node);
    const parent = row.parent ? byId.get(row.parent) : undefined;
    if (parent) (parent._children ??= []).push(node);
    else roots.push(node);
  }
  return roots;
}

export class ShapesTree {
  private table: Tabulator;
  private el = h("div");

  constructor(container: HTMLElement, columns: ShapesColumn<OpShapeRow>[], rows: OpShapeRow[], onClick: (row: OpShapeRow) => void) {
    container.appendChild(this.el);
    this.table = new Tabulator(this.el, {
      layout: "fitColumns",
      maxHeight: "520px",
      data: nest(rows),
      dataTree: true,
      dataTreeStartExpanded: (_row: RowComponent, level: number) => level < 1,
      dataTreeChildIndent: 14,
      columns: columns.map((c) => ({ ...toColumn(c), headerSort: true })),
      columnDefaults: { resizable: true, vertAlign: "middle" },
      placeholder: () => emptyState("No ops", "Nothing matches the current filter."),
    });
    this.table.on("tableBuilt", () => this.table.on("rowClick", (_e: UIEvent, row: RowComponent) => onClick(row.getData() as OpShapeRow)));
  }

  destroy(): void {
    this.table.destroy();
    this.el.remove();
  }
}
