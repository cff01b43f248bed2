// The plugin's theme as the canvas-drawn parts of the Execution graph read it: the `data-theme` attribute of the
// document element ("light" | "dark", set by the shell), else the OS preference; changes arrive as the window's
// "gpuinsight-theme" event (and, while no attribute is set, as the OS preference changing).
export type Theme = "light" | "dark";

const DARK_QUERY = "(prefers-color-scheme: dark)";

export function currentTheme(): Theme {
  const attr = document.documentElement.getAttribute("data-theme");
  if (attr === "dark" || attr === "light") return attr;
  return typeof window.matchMedia === "function" && window.matchMedia(DARK_QUERY).matches ? "dark" : "light";
}

/** Call `fn` with the new theme whenever it changes; returns the unsubscribe function. */
export function onThemeChange(fn: (theme: Theme) => void): () => void {
  const onEvent = (ev: Event) => {
    const theme = (ev as CustomEvent<{ theme?: string }>).detail?.theme;
    fn(theme === "dark" || theme === "light" ? theme : currentTheme());
  };
  const media = typeof window.matchMedia === "function" ? window.matchMedia(DARK_QUERY) : null;
  const onMedia = () => fn(currentTheme());
  window.addEventListener("gpuinsight-theme", onEvent);
  media?.addEventListener("change", onMedia);
  return () => {
    window.removeEventListener("gpuinsight-theme", onEvent);
    media?.removeEventListener("change", onMedia);
  };
}
