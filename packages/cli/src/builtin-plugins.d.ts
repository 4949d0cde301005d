/** The virtual module scripts/build-bin.mjs generates for the built bin (see bundle.ts). */
declare module 'conch:builtin-plugins' {
  const plugins: Record<string, () => Promise<unknown>>
  export default plugins
}
