// The tab registry, in display order. Later tabs replace their placeholder with a module of their own.
import { diffTab } from "./diff/tab";
import { distributedTab } from "./distributed/tab";
import { executionGraphTab } from "./graph/tab";
import { kernelEfficiencyTab } from "./kernels/tab";
import { memoryTab } from "./memory/tab";
import { overviewTab } from "./overview/tab";
import { tensorShapesTab } from "./shapes/tab";
import { timelineTab } from "./timeline/tab";
import { trendsTab } from "./trends/tab";
import type { TabDef } from "./types";

export const TABS: readonly TabDef[] = [
  overviewTab,
  kernelEfficiencyTab,
  diffTab,
  trendsTab,
  tensorShapesTab,
  executionGraphTab,
  memoryTab,
  timelineTab,
  distributedTab,
];

export type { TabDef, TabView } from "./types";
