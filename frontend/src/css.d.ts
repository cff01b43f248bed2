// esbuild loads .css files as text (loader ".css": "text"); main.ts injects them in a <style> element.
declare module "*.css" {
  const text: string;
  export default text;
}
