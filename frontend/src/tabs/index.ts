// The tab registry, in display order. Later tabs replace their placeholder with a module of their own.
import { diffTab } from "./diff";
import { distributedTab } from "./distributed";
import { executionGraphTab } from "./executionGraph";
import { kernelEfficiencyTab } from "./kernelEfficiency";
import { memoryTab } from "./memory";
import { overviewTab } from "./overview";
import { tensorShapesTab } from "./tensorShapes";
import { timelineTab } from "./timeline";
import { trendsTab } from "./trends";
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
