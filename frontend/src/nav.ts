// "Show on timeline": the target waits here until the Timeline tab mounts (the shell switches tabs through
// state.ts's openTab, as every cross-tab link does).
import { h } from "./dom";
import { ALL_SPANS, openTab } from "./state";

export interface TimelineTarget {
  /** The exact name (a kernel's or an op's), or a part of names when `partial`. */
  name: string;
  /** The name's key from the route that listed it (rows carry `name_key`): exact whatever the name's length. */
  key?: string;
  /** Find every name containing `name` (a filter's text), not one name. */
  partial?: boolean;
  device?: number;
  /** The span to look in (the header's "all spans" leaves the Timeline's own choice). */
  span?: string;
}

let pendingTimeline: TimelineTarget | null = null;

/** Switch to the Timeline tab and highlight every occurrence of `target.name` there. */
export function showOnTimeline(target: TimelineTarget): void {
  pendingTimeline = target;
  openTab("timeline");
}

/** A small "Show on timeline" button for `name` (a kernel or an op), for any tab's rows and panels. */
export function timelineButton(name: string, span?: string, text = "Show on timeline", key?: string): HTMLElement {
  return h("button", {
    class: "btn btn-small show-on-timeline",
    text,
    title: `Highlight every occurrence of ${name} on the Timeline`,
    on: { click: () => showOnTimeline({ name, key, span: span && span !== ALL_SPANS ? span : undefined }) },
  });
}

/** The target a Timeline tab should land on, once (null when none is pending). */
export function takeTimelineTarget(): TimelineTarget | null {
  const t = pendingTimeline;
  pendingTimeline = null;
  return t;
}
