// "Show on timeline": the target waits here until the Timeline tab mounts (the shell switches tabs through
// state.ts's openTab, as every cross-tab link does).
import { openTab } from "./state";

export interface TimelineTarget {
  name: string;
  device?: number;
}

let pendingTimeline: TimelineTarget | null = null;

/** Switch to the Timeline tab and highlight every occurrence of `target.name` there. */
export function showOnTimeline(target: TimelineTarget): void {
  pendingTimeline = target;
  openTab("timeline");
}

/** The target a Timeline tab should land on, once (null when none is pending). */
export function takeTimelineTarget(): TimelineTarget | null {
  const t = pendingTimeline;
  pendingTimeline = null;
  return t;
}
