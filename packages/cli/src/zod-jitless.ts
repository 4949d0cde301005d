/**
 * zod's parsers without generated code: zod 4 compiles each object schema with `new Function` on
 * its first parse, and a conch start parses most schemas once, so the compile costs more than it
 * saves. Imported first by both entries: zod reads the setting when a schema is created.
 */
import { z } from 'zod'

z.config({ jitless: true })
