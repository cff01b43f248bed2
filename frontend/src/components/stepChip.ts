// The Overview's step scope as a removable chip: shown by every tab that honours the scope; its × clears it.
import { h } from "../dom";
import { nav, type StepScope } from "../state";

/** A chip naming the scoped step (null when none applies); `title` says what the scope does in this tab. */
export function stepChip(scope: StepScope | null, title: string): HTMLElement | null {
  if (!scope) return null;
  return h(
    "span",
    { class: "chip chip-step", title },
    h("span", { text: `step: ${scope.label}` }),
    h("button", { class: "chip-x", text: "×", attrs: { "aria-label": "Show every step" }, on: { click: () => nav.set({ scope: null }) } }),
  );
}
