// The contract between the shell (main.ts) and a tab. Each tab is its own module.
import type { Selection } from "../api";

export interface TabView {
  /** The header's run / worker / span changed. */
  update(sel: Selection): void;
  destroy(): void;
}

export interface TabDef {
  id: string;
  label: string;
  /** Build the tab into `host` (an empty element owned by the tab until destroy()). */
  mount(host: HTMLElement, sel: Selection): TabView;
}
