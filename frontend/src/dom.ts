// Tiny DOM builder. Text always goes in through textContent, never innerHTML: kernel names contain <, > and &.

type Child = Node | string | number | null | undefined | false;

export interface Props {
  class?: string;
  title?: string;
  text?: string;
  attrs?: Record<string, string>;
  style?: Partial<Record<"width" | "height" | "background" | "color", string>>;
  on?: Partial<{ [K in keyof HTMLElementEventMap]: (ev: HTMLElementEventMap[K]) => void }>;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (props) {
    if (props.class) el.className = props.class;
    if (props.title) el.title = props.title;
    if (props.text !== undefined) el.textContent = props.text;
    if (props.attrs) for (const [k, v] of Object.entries(props.attrs)) el.setAttribute(k, v);
    if (props.style) Object.assign(el.style, props.style);
    if (props.on) {
      for (const [type, fn] of Object.entries(props.on)) el.addEventListener(type, fn as EventListener);
    }
  }
  append(el, ...children);
  return el;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace all children of `parent`. */
export function replace(parent: Node, ...children: Child[]): void {
  while (parent.firstChild) parent.removeChild(parent.firstChild);
  append(parent, ...children);
}

/** A `<select>` whose options are [value, label] pairs. */
export function select(
  options: ReadonlyArray<readonly [string, string]>,
  value: string,
  onChange: (value: string) => void,
  props: Props = {},
): HTMLSelectElement {
  const el = h("select", props);
  setOptions(el, options, value);
  el.addEventListener("change", () => onChange(el.value));
  return el;
}

export function setOptions(el: HTMLSelectElement, options: ReadonlyArray<readonly [string, string]>, value: string): void {
  replace(el, ...options.map(([v, label]) => h("option", { text: label, attrs: { value: v } })));
  el.value = value;
}

/** A labelled form control: `<label><span>Text</span>control</label>`. */
export function field(label: string, control: HTMLElement, cls = "field"): HTMLLabelElement {
  return h("label", { class: cls }, h("span", { class: "field-label", text: label }), control);
}

export function debounce<A extends unknown[]>(fn: (...args: A) => void, ms: number): (...args: A) => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return (...args: A) => {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/**
 * A one-line text that keeps both ends of a long name visible: its head is cut with an ellipsis, its tail (the
 * distinctive suffix of a kernel name) always shows. The two parts are inline (not flex items), so the element's
 * text, a selection and a copy are the whole text on one line.
 */
export function middleEllipsis(text: string, title = text, cls = ""): HTMLElement {
  const cut = text.length > 24 ? text.length - Math.min(16, Math.ceil(text.length * 0.35)) : text.length;
  const el = h(
    "span",
    { class: `mid-ellipsis ${cls}`.trim(), title },
    h("span", { class: "mid-head", text: text.slice(0, cut) }),
    h("span", { class: "mid-tail", text: text.slice(cut) }),
  );
  el.style.setProperty("--gi-tail", `${text.length - cut + 1}ch`);
  return el;
}

/** Scroll the page so that `el` is in view and not under `cover` (a bottom-sheet drawer) when it overlaps it. */
export function keepClear(el: HTMLElement, cover: HTMLElement): void {
  const r = el.getBoundingClientRect();
  const c = cover.hidden ? null : cover.getBoundingClientRect();
  const overlaps = c !== null && c.left < r.right && c.right > r.left && c.top > 0;
  const bottom = overlaps ? c.top : window.innerHeight;
  const margin = 12;
  if (r.bottom > bottom - margin) window.scrollBy({ top: r.bottom - bottom + margin + r.height });
  else if (r.top < margin) window.scrollBy({ top: r.top - margin - r.height });
}

/** The element (the hovered one or one of its three nearest ancestors) whose text is cut by CSS (ellipsis or a
 * hidden overflow), or null. */
export function truncatedAt(target: Element | null): HTMLElement | null {
  for (let el = target, depth = 0; el instanceof HTMLElement && depth < 4; el = el.parentElement, depth++) {
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") return el;
  }
  return null;
}

/** A truncated label always has its full text on hover: under `root`, an element cut by CSS that has no title of
 * its own (nor an ancestor's) gets its full text as title when the pointer reaches it. */
export function fullTextOnHover(root: HTMLElement): void {
  root.addEventListener("mouseover", (ev) => {
    const el = truncatedAt(ev.target as Element | null);
    if (!el || el.closest("[title]") || el.querySelector("canvas, input, select, textarea")) return;
    const text = (el.textContent ?? "").trim();
    if (text) el.title = text;
  });
}
