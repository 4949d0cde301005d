/**
 * zod's parsers without generated code, for every schema of this process. zod 4 compiles a
 * fast path for each object schema with `new Function` on its first parse; a conch start parses
 * most of its schemas exactly once (configs, the yml rows), so the compile costs more than it
 * saves (about 20 ms per start measured on the root cordis.yml). Imported first by both entries,
 * because zod reads the setting when a schema is created.
 */
import { z } from 'zod'

z.config({ jitless: true })
