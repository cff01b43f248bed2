// A tab that is not built yet: a clear empty state instead of a blank page.
import { emptyState } from "../components/states";
import type { TabDef, TabView } from "./types";

export function placeholderTab(id: string, label: string, what: string): TabDef {
  return {
    id,
    label,
    mount(host: HTMLElement): TabView {
      host.appendChild(emptyState(`${label}: not available yet`, what));
      return { update() {}, destroy() {} };
    },
  };
}
