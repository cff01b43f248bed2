// Cross-tab links: a tab asks the shell to show another tab with a target (e.g. "show this kernel on the
// timeline"). The target waits here until the destination tab mounts or is told.
export interface TimelineTarget {
  name: string;
  device?: number;
}

export const NAVIGATE_EVENT = "gi:navigate";
let pendingTimeline: TimelineTarget | null = null;

/** Switch to the Timeline tab and highlight every occurrence of `target.name` there. */
export function showOnTimeline(target: TimelineTarget): void {
  pendingTimeline = target;
  window.dispatchEvent(new CustomEvent(NAVIGATE_EVENT, { detail: { tab: "timeline" } }));
}

/** The target a Timeline tab should land on, once (null when none is pending). */
export function takeTimelineTarget(): TimelineTarget | null {
  const t = pendingTimeline;
  pendingTimeline = null;
  return t;
}
