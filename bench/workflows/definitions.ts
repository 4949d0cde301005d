/**
 * The eight scripted workflows of the `workflows` bench, each written three ways (conch's tools,
 * the tmux harness, the pipe tool: docs/performance.md, "Tokens per workflow"), with the files it
 * starts from and a check of the end state every way must reach. A tmux step at the shell prompt
 * is `block` (Terminus appends `; tmux wait -S <channel>`); any other step waits its `waitMs`.
 */

/** The dev server's port, one per bench process so two runs on one machine do not collide. */
export const PORT = 20_000 + (process.pid % 20_000)

/** What a conch script can do: the tool calls a model makes, and ending its turn to be woken. */
export interface ConchDriver {
  /** terminal_send to the agent's shell (no sessionId); `text` alone is a submitted line. Returns the result text. */
  send(input: string | Record<string, unknown>): Promise<string>
  /** Any tool call; returns the result text. */
  call(name: string, input: Record<string, unknown>): Promise<string>
  /** Ends the turn until a text the model read (a result, a notification) matches `pattern`. */
  waitFor(pattern: RegExp): Promise<void>
}

export interface TmuxStep {
  /** Typed literally; with `key`, a tmux key name (`Escape`). */
  keys: string
  key?: boolean
  /** Enter after the keys (default true unless `key`). */
  enter?: boolean
  /** At the shell prompt: `; tmux wait -S` appended and waited for, up to `waitMs`. */
  block?: boolean
  /** The fixed wait of a step that is not `block`, or the bound of one that is, ms. */
  waitMs: number
}

export interface Workflow {
  name: string
  /** Files of the workspace before the run, by relative path. */
  files: Record<string, string>
  /** A shell command run in the workspace after the files are written (not measured). */
  setup?: string
  conch(t: ConchDriver): Promise<void>
  tmux: readonly TmuxStep[]
  /** One `bash -c` per entry. */
  pipe: readonly string[]
  /** Why the end state is wrong, or undefined when it is right; `read` is every text the model read. */
  check(read: string, file: (path: string) => string | undefined): string | undefined
}

const shell = (keys: string, waitMs = 10_000): TmuxStep => ({ keys, block: true, waitMs })
const typed = (keys: string, waitMs: number, enter = true): TmuxStep => ({ keys, enter, waitMs })
const expect = (ok: boolean, why: string) => (ok ? undefined : why)

const HELLO_C = `#include <stdio.h>

static int total(int n) {
  int sum = 0;
  for (int i = 1; i <= n; i++) sum += i;
  return sum
}

int main(void) {
  printf("total %d\\n", total(9));
  return 0;
}
`

const CRASH_C = `#include <stdio.h>
#include <stddef.h>

struct node { int value; struct node *next; };

static int sum_list(const struct node *head, int count) {
  int sum = 0;
  for (int i = 0; i < count; i++) {
    sum += head->value;
    head = head->next;
  }
  return sum;
}

int main(void) {
  struct node c = {3, NULL}, b = {2, &c}, a = {1, &b};
  printf("%d\\n", sum_list(&a, 4));
  return 0;
}
`

const STATS_PY = `import statistics
import sys

values = [3, 1, 4, 1, 5, 9, 2, 6]


def describe(name, data):
    print(name, "n", len(data))
    print(name, "mean", statistics.mean(data))
    print(name, "median", statistics.median(data))
    print(name, "stdev", round(statistics.stdev(data), 3))


describe("values", values)
describe("squares", [v * v for v in values])
sys.exit(0)
`

const BUILD_SH = `#!/bin/bash
mkdir -p out
for i in $(seq 1 20); do echo "compiling unit $i/20"; sleep 0.1; done
printf 'app\\n' > out/app
echo "BUILD OK"
`

const APP_LOG = Array.from({ length: 5000 }, (_, k) => (k + 1 === 3210 ? 'ERROR code=4321 request id=3210 failed' : `INFO request id=${k + 1} ok`)).join('\n') + '\n'

const PAGE_HTML = '<!doctype html><title>bench</title><p>served by the dev server</p>\n'

const fix = "sed -i 's/return sum$/return sum;/' hello.c"
const build = 'gcc -Wall -o hello hello.c'
const runCurl = `curl -s -o fetched.html http://127.0.0.1:${PORT}/page.html && cat fetched.html`
const gitSetup = "git init -q && git config user.name bench && git config user.email bench@example.invalid && git config core.editor 'vim -Nu DEFAULTS -i NONE' && git add -A && git commit -qm init && printf 'hello\\n' >> README.md && git add README.md"

export const WORKFLOWS: readonly Workflow[] = [
  {
    name: 'build-and-fix C',
    files: { 'hello.c': HELLO_C },
    async conch(t) {
      await t.send(build)
      await t.send(fix)
      await t.send(`${build} && ./hello`)
    },
    tmux: [shell(build), shell(fix), shell(`${build} && ./hello`)],
    pipe: [build, fix, `${build} && ./hello`],
    check: (read, file) => expect(file('hello') !== undefined && read.includes('total 45'), 'hello was not built, or did not print total 45'),
  },
  {
    name: 'Python REPL session',
    files: {},
    async conch(t) {
      await t.send('python3 -q')
      await t.send('x = [i * i for i in range(10)]')
      await t.send('sum(x)')
      await t.send('def f(n): return n * 2\n')
      await t.send('f(sum(x))')
      await t.send("open('answer.txt', 'w').write(str(f(sum(x))))")
      await t.send('exit()')
    },
    tmux: [
      typed('python3 -q', 1000),
      typed('x = [i * i for i in range(10)]', 100),
      typed('sum(x)', 100),
      typed('def f(n): return n * 2', 100),
      typed('', 100),
      typed('f(sum(x))', 100),
      typed("open('answer.txt', 'w').write(str(f(sum(x))))", 100),
      typed('exit()', 100),
    ],
    pipe: [
      "python3 -c 'x = [i * i for i in range(10)]; print(sum(x))'",
      "python3 - <<'EOF'\nx = [i * i for i in range(10)]\ndef f(n): return n * 2\nprint(f(sum(x)))\nopen('answer.txt', 'w').write(str(f(sum(x))))\nEOF",
    ],
    check: (read, file) => expect(file('answer.txt') === '570' && read.includes('285'), 'answer.txt does not hold 570, or sum(x) was not read as 285'),
  },
  {
    name: 'heredoc file write',
    files: {},
    async conch(t) {
      await t.send(`cat > stats.py <<'EOF'\n${STATS_PY}EOF`)
      await t.send('python3 stats.py')
    },
    tmux: [typed(`cat > stats.py <<'EOF'\n${STATS_PY}EOF`, 100), shell('python3 stats.py')],
    pipe: [`cat > stats.py <<'EOF'\n${STATS_PY}EOF`, 'python3 stats.py'],
    check: (read, file) => expect(file('stats.py') === STATS_PY && read.includes('values median 3.5'), 'stats.py differs from what was typed, or its run was not read'),
  },
  {
    name: 'dev server + curl',
    files: { 'page.html': PAGE_HTML },
    async conch(t) {
      // A background send without sessionId runs in a shell of its own; the agent's shell stays free.
      const started = await t.send({ text: `python3 -m http.server ${PORT} --bind 127.0.0.1`, run_in_background: true, notifyOn: 'Serving HTTP' })
      const task = /\[task: (task-\d+)/.exec(started)?.[1]
      if (task === undefined) throw new Error(`the server's send did not start a task: ${started}`)
      await t.waitFor(/matched "Serving HTTP"/)
      await t.send(runCurl)
      await t.call('task_kill', { taskId: task })
    },
    tmux: [typed(`python3 -m http.server ${PORT} --bind 127.0.0.1 &`, 1000), shell(runCurl), shell('kill %1')],
    pipe: [
      `nohup python3 -m http.server ${PORT} --bind 127.0.0.1 > server.log 2>&1 & echo $! > server.pid`,
      `for i in $(seq 50); do curl -sf -o fetched.html http://127.0.0.1:${PORT}/page.html && break; sleep 0.1; done; cat fetched.html`,
      'kill $(cat server.pid)',
    ],
    check: (read, file) => expect(file('fetched.html') === PAGE_HTML && read.includes('served by the dev server'), 'the page was not fetched'),
  },
  {
    name: 'gdb session',
    files: { 'crash.c': CRASH_C },
    async conch(t) {
      await t.send('gcc -g -O0 -o crash crash.c')
      await t.send('gdb -q ./crash')
      await t.send('run')
      await t.send('bt')
      await t.send('print i')
      await t.send('print sum')
      await t.send('quit')
      await t.send('y')
    },
    tmux: [
      shell('gcc -g -O0 -o crash crash.c'),
      typed('gdb -q ./crash', 1000),
      typed('run', 1000),
      typed('bt', 100),
      typed('print i', 100),
      typed('print sum', 100),
      typed('quit', 100),
      typed('y', 100),
    ],
    pipe: ['gcc -g -O0 -o crash crash.c', "gdb -q -batch -ex run -ex bt -ex 'print i' -ex 'print sum' ./crash"],
    check: (read) => expect(read.includes('$1 = 3') && read.includes('$2 = 6') && read.includes('sum_list'), 'gdb did not show the crash in sum_list with i = 3, sum = 6'),
  },
  {
    name: 'git commit with an editor',
    files: { 'README.md': '# bench\n' },
    setup: gitSetup,
    async conch(t) {
      await t.send('git commit')
      await t.send({ text: 'iAdd a greeting\u001b', submit: false })
      await t.send(':wq')
    },
    tmux: [typed('git commit', 1000), typed('iAdd a greeting', 100, false), { keys: 'Escape', key: true, waitMs: 100 }, typed(':wq', 1000)],
    pipe: ["git commit -m 'Add a greeting'"],
    check: (_read, file) => expect(file('.git/logs/HEAD')?.includes('\tcommit: Add a greeting\n') === true, 'HEAD is not a commit "Add a greeting"'),
  },
  {
    name: 'long build + background job',
    files: { 'build.sh': BUILD_SH },
    setup: 'chmod +x build.sh',
    async conch(t) {
      await t.send({ text: './build.sh', run_in_background: true, notify: true })
      await t.send("printf 'notes\\n' > side.txt && wc -l build.sh")
      await t.waitFor(/task-\d+ exited 0/)
    },
    tmux: [typed('./build.sh > build.log 2>&1 &', 100), shell("printf 'notes\\n' > side.txt && wc -l build.sh"), shell('wait; tail -n 2 build.log')],
    pipe: [
      '(./build.sh > build.log 2>&1; echo $? > build.status) > /dev/null 2>&1 &',
      "printf 'notes\\n' > side.txt && wc -l build.sh",
      'while [ ! -f build.status ]; do sleep 0.2; done; tail -n 2 build.log; cat build.status',
    ],
    check: (read, file) => expect(file('out/app') === 'app\n' && file('side.txt') === 'notes\n' && read.includes('BUILD OK'), 'the build or the side job did not finish, or BUILD OK was not read'),
  },
  {
    name: 'full-screen program (less)',
    files: { 'app.log': APP_LOG },
    async conch(t) {
      await t.send('less app.log')
      await t.send('/ERROR')
      await t.send({ text: 'q', submit: false })
    },
    tmux: [typed('less app.log', 100), typed('/ERROR', 100), typed('q', 100, false)],
    pipe: ['grep -n ERROR app.log'],
    check: (read) => expect(read.includes('ERROR code=4321 request id=3210'), 'the error line was not read'),
  },
]
