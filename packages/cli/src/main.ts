/**
 * Process entry of the `conch` bin when it runs from the sources (bin/conch.js registers tsx,
 * then imports this file); see process.ts.
 */
import './zod-jitless.ts'
import { runProcess } from './process.ts'

await runProcess()
