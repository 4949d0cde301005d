;; The output parser's ground-state pass (output.ts, `OutputParser`), in WebAssembly: one call
;; per stretch of a chunk, so JavaScript pays per chunk and per line, not per control.
;;
;; `scan` reads valid UTF-8 (the caller checks) from memory[pos, end) in the ground state on a
;; simple line (no attached screen, no marks) and does what the parser's line model would do with
;; the common bytes, writing the text of the lines it builds to OUT (from `out`):
;; - printable ASCII, TAB and UTF-8 sequences: appended at the end of the line; ASCII over ASCII
;;   where the cursor is left of the end (after CR or BS) overwrites one byte;
;; - C1 controls (C2 80 .. C2 9F), DEL, CAN, SUB and the C0 controls other than BS, LF, CR and
;;   ESC: dropped;
;; - CR LF and LF: commit the line (a pair of UTF-16 offsets into the decoded OUT in LINES);
;;   CR: cursor to the line start; BS: one code point left;
;; - CSI with an optional private prefix, digits and separators: SGR and every sequence the line
;;   model ignores are skipped; EL 0 and ED 0 cut the line at the cursor, EL 2 on column 0
;;   empties it; DECSET/DECRST (`CSI ? … h/l`) of at most four modes, none of them an alternate
;;   screen, is an EVENT (kind 3) for JavaScript to apply in order;
;; - OSC ending in BEL or ESC (the start of ST) with no control in its body, on an empty line:
;;   its payload is written to OUT where the line would start and reported as an EVENT (kind 2);
;; - DCS, SOS, PM and APC strings (one with a CR or LF in its body only when ST ends it), and
;;   two- and three-byte escapes (ESC 7, ESC ( B, ESC \): skipped.
;; At anything else it stops with `pos` at the first byte it did not take, every state word
;; describing the line as it stands there; the caller parses from there in JavaScript.
;;
;; State block at byte 0, one i32 word each (read and written by the caller):
;;   0 pos     first input byte (in) / first byte not taken (out)
;;   1 end     end of the input
;;   2 out     end of the written text in OUT
;;   3 ls      start of the current line in OUT
;;   4 cur     cursor in OUT (ls <= cur <= out)
;;   5 la      1 while the current line is ASCII only
;;   6 ls16    UTF-16 offset of `ls` in OUT decoded
;;   7 l16     UTF-16 length of the current line
;;   8 c16     UTF-16 offset of the cursor in the line
;;   9 max16   bound on a line in UTF-16 code units (`maxLineLength`)
;;  10 maxSeq  bound on a sequence (`maxStringBytes`)
;;  11 lp      next free word pair in LINES: (start16, end16) of each committed line
;;  12 ep      next free record in EVENTS: 8 words [kind, lines committed before it, …]:
;;             kind 2 (OSC): UTF-16 start and end of the payload in OUT decoded, 1 if ESC ended
;;             it (else BEL), the input address after the terminator's first byte;
;;             kind 3 (DECSET/DECRST): 1 for set, the number of modes (1-4), the modes
;;  13 oa      1 while everything written to OUT is ASCII
;;  14 mod     edits of text already on a line (overwrites, erases), counted
;;  15 lbase   start of LINES (to number the lines)
;;  16 lend    end of LINES; 17 eend end of EVENTS (a full one stops the pass)
;;  18 quiet   1 when cursor addressing (CUP, HVP, VPA, DECSTBM, ED 2/3) has no effect on the
;;             parser (no screen attached, no screen listener): it is skipped instead of stopping
(module
  (memory (export "memory") 1)

  (func (export "scan")
    (local $i i32) (local $end i32) (local $out i32) (local $ls i32) (local $cur i32)
    (local $la i32) (local $ls16 i32) (local $l16 i32) (local $c16 i32) (local $max16 i32)
    (local $maxSeq i32) (local $lp i32) (local $ep i32) (local $oa i32) (local $mod i32)
    (local $lbase i32) (local $lend i32) (local $eend i32) (local $quiet i32)
    (local $c i32) (local $d i32) (local $j i32) (local $k i32) (local $len i32) (local $w i32)
    (local $prefix i32) (local $param i32) (local $p0 i32) (local $idx i32) (local $alt i32)
    (local $stop i32) (local $v v128) (local $q0 i32) (local $q1 i32) (local $q2 i32) (local $q3 i32)

    (local.set $i (i32.load (i32.const 0)))
    (local.set $end (i32.load (i32.const 4)))
    (local.set $out (i32.load (i32.const 8)))
    (local.set $ls (i32.load (i32.const 12)))
    (local.set $cur (i32.load (i32.const 16)))
    (local.set $la (i32.load (i32.const 20)))
    (local.set $ls16 (i32.load (i32.const 24)))
    (local.set $l16 (i32.load (i32.const 28)))
    (local.set $c16 (i32.load (i32.const 32)))
    (local.set $max16 (i32.load (i32.const 36)))
    (local.set $maxSeq (i32.load (i32.const 40)))
    (local.set $lp (i32.load (i32.const 44)))
    (local.set $ep (i32.load (i32.const 48)))
    (local.set $oa (i32.load (i32.const 52)))
    (local.set $mod (i32.load (i32.const 56)))
    (local.set $lbase (i32.load (i32.const 60)))
    (local.set $lend (i32.load (i32.const 64)))
    (local.set $eend (i32.load (i32.const 68)))
    (local.set $quiet (i32.load (i32.const 72)))

    (block $exit
      (loop $main
        (br_if $exit (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $i)))

        ;; Appending text, 16 bytes at a time: every byte but the C0 controls, DEL and C2 (the lead
        ;; byte of the C1 controls) is copied as it is; the line's UTF-16 length grows by one per
        ;; byte that is not a continuation byte (80-BF) and by one more per 4-byte lead (F0-F4).
        (if (i32.and (i32.eq (local.get $cur) (local.get $out))
                     (i32.and (i32.ge_u (local.get $c) (i32.const 0x20))
                              (i32.and (i32.ne (local.get $c) (i32.const 0x7f)) (i32.ne (local.get $c) (i32.const 0xc2)))))
          (then
            (local.set $k (local.get $i))
            (block $blocks_end
              (loop $blocks
                (br_if $blocks_end (i32.gt_u (i32.add (local.get $l16) (i32.const 16)) (local.get $max16)))
                (br_if $blocks_end (i32.gt_u (i32.add (local.get $i) (i32.const 16)) (local.get $end)))
                (local.set $v (v128.load (local.get $i)))
                (local.set $len (i8x16.bitmask
                  (v128.or (i8x16.lt_u (local.get $v) (v128.const i8x16 0x20 0x20 0x20 0x20 0x20 0x20 0x20 0x20 0x20 0x20 0x20 0x20 0x20 0x20 0x20 0x20))
                           (v128.or (i8x16.eq (local.get $v) (v128.const i8x16 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f))
                                    (i8x16.eq (local.get $v) (v128.const i8x16 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2 0xc2))))))
                ;; $w: how many bytes of the block are text; $d: the mask of those bytes.
                (local.set $w (select (i32.ctz (local.get $len)) (i32.const 16) (local.get $len)))
                (local.set $d (i32.sub (i32.shl (i32.const 1) (local.get $w)) (i32.const 1)))
                (v128.store (local.get $out) (local.get $v))
                (if (i32.and (i8x16.bitmask (local.get $v)) (local.get $d))
                  (then
                    (local.set $la (i32.const 0))
                    (local.set $oa (i32.const 0))
                    (local.set $w (i32.add (i32.sub (local.get $w)
                        (i32.popcnt (i32.and (local.get $d) (i8x16.bitmask (i8x16.lt_s (local.get $v) (v128.const i8x16 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0 0xc0))))))
                      (i32.popcnt (i32.and (local.get $d) (i8x16.bitmask (i8x16.ge_u (local.get $v) (v128.const i8x16 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0 0xf0))))))))
                  (else (local.set $w (i32.popcnt (local.get $d)))))
                (local.set $l16 (i32.add (local.get $l16) (local.get $w)))
                (local.set $w (i32.popcnt (local.get $d)))
                (local.set $out (i32.add (local.get $out) (local.get $w)))
                (local.set $i (i32.add (local.get $i) (local.get $w)))
                (br_if $blocks (i32.eq (local.get $w) (i32.const 16)))
                ;; CR LF after the text (short lines): commit here and go on with the next block.
                (br_if $blocks_end (i32.ge_u (i32.add (local.get $i) (i32.const 1)) (local.get $end)))
                (br_if $blocks_end (i32.ne (i32.load16_u (local.get $i)) (i32.const 0x0a0d)))
                (br_if $blocks_end (i32.ge_u (local.get $lp) (local.get $lend)))
                (i32.store (local.get $lp) (local.get $ls16))
                (i32.store offset=4 (local.get $lp) (i32.add (local.get $ls16) (local.get $l16)))
                (local.set $lp (i32.add (local.get $lp) (i32.const 8)))
                (local.set $ls16 (i32.add (local.get $ls16) (local.get $l16)))
                (local.set $l16 (i32.const 0))
                (local.set $ls (local.get $out))
                (local.set $la (i32.const 1))
                (local.set $i (i32.add (local.get $i) (i32.const 2)))
                (br $blocks)))
            (if (i32.ne (local.get $i) (local.get $k))
              (then
                ;; Never stop inside a UTF-8 sequence: back to its lead byte.
                (if (i32.and (i32.lt_u (local.get $i) (local.get $end))
                             (i32.eq (i32.and (i32.load8_u (local.get $i)) (i32.const 0xc0)) (i32.const 0x80)))
                  (then
                    (block $lead_found
                      (loop $to_lead
                        (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                        (local.set $out (i32.sub (local.get $out) (i32.const 1)))
                        (br_if $to_lead (i32.eq (i32.and (i32.load8_u (local.get $i)) (i32.const 0xc0)) (i32.const 0x80)))))
                    (local.set $l16 (i32.sub (local.get $l16)
                      (select (i32.const 2) (i32.const 1) (i32.ge_u (i32.load8_u (local.get $i)) (i32.const 0xf0)))))))
                (local.set $cur (local.get $out))
                (local.set $c16 (local.get $l16))
                (br $main)))))

        (if (i32.eq (local.get $c) (i32.const 0x1b))
          (then
            (br_if $exit (i32.ge_u (i32.add (local.get $i) (i32.const 1)) (local.get $end)))
            (local.set $d (i32.load8_u offset=1 (local.get $i)))

            ;; ESC [: a CSI with an optional private prefix, digits and separators.
            (if (i32.eq (local.get $d) (i32.const 0x5b))
              (then
                (local.set $j (i32.add (local.get $i) (i32.const 2)))
                (local.set $d (select (i32.load8_u (local.get $j)) (i32.const -1) (i32.lt_u (local.get $j) (local.get $end))))
                (local.set $prefix (i32.const 0))
                (if (i32.lt_u (i32.sub (local.get $d) (i32.const 0x3c)) (i32.const 4))
                  (then
                    (local.set $prefix (local.get $d))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (local.set $d (select (i32.load8_u (local.get $j)) (i32.const -1) (i32.lt_u (local.get $j) (local.get $end))))))
                ;; Find the final byte first: SGR, most of them, needs no parameter.
                (local.set $k (local.get $j))
                (block $scan_end
                  (loop $scan
                    (br_if $scan_end (i32.ge_u (i32.sub (local.get $d) (i32.const 0x30)) (i32.const 12)))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (local.set $d (select (i32.load8_u (local.get $j)) (i32.const -1) (i32.lt_u (local.get $j) (local.get $end))))
                    (br $scan)))
                ;; No final byte in the input (or an intermediate, a control): the JavaScript table.
                (br_if $exit (i32.gt_u (i32.sub (local.get $d) (i32.const 0x40)) (i32.const 0x3e)))
                (br_if $exit (i32.gt_u (i32.sub (i32.sub (local.get $j) (local.get $i)) (i32.const 1)) (local.get $maxSeq)))
                (if (i32.and (i32.eqz (local.get $prefix)) (i32.eq (local.get $d) (i32.const 0x6d)))
                  (then (local.set $i (i32.add (local.get $j) (i32.const 1))) (br $main)))
                ;; The parameters, read again from the start.
                (local.set $j (local.get $k))
                (local.set $d (i32.load8_u (local.get $j)))
                (local.set $param (i32.const -1))
                (local.set $idx (i32.const 0))
                (local.set $alt (i32.const 0))
                (local.set $p0 (i32.const -1))
                (block $params_end
                  (loop $params
                    (br_if $params_end (i32.ge_u (i32.sub (local.get $d) (i32.const 0x30)) (i32.const 12)))
                    (if (i32.le_u (local.get $d) (i32.const 0x39))
                      (then
                        (local.set $param (i32.add
                          (i32.mul (select (i32.const 0) (local.get $param) (i32.lt_s (local.get $param) (i32.const 0))) (i32.const 10))
                          (i32.sub (local.get $d) (i32.const 0x30))))
                        (if (i32.gt_s (local.get $param) (i32.const 0xffff)) (then (local.set $param (i32.const 0xffff)))))
                      (else
                        ;; A separator ends a parameter.
                        (if (i32.eqz (local.get $idx)) (then (local.set $p0 (local.get $param))))
                        (if (i32.eq (local.get $idx) (i32.const 1)) (then (local.set $q1 (local.get $param))))
                        (if (i32.eq (local.get $idx) (i32.const 2)) (then (local.set $q2 (local.get $param))))
                        (if (i32.eq (local.get $idx) (i32.const 3)) (then (local.set $q3 (local.get $param))))
                        (if (i32.or (i32.or (i32.eq (local.get $param) (i32.const 47)) (i32.eq (local.get $param) (i32.const 1047)))
                                    (i32.eq (local.get $param) (i32.const 1049)))
                          (then (local.set $alt (i32.const 1))))
                        (local.set $idx (i32.add (local.get $idx) (i32.const 1)))
                        (local.set $param (i32.const -1))))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (local.set $d (i32.load8_u (local.get $j)))
                    (br $params)))
                ;; The last parameter.
                (if (i32.eqz (local.get $idx)) (then (local.set $p0 (local.get $param))))
                (if (i32.eq (local.get $idx) (i32.const 1)) (then (local.set $q1 (local.get $param))))
                (if (i32.eq (local.get $idx) (i32.const 2)) (then (local.set $q2 (local.get $param))))
                (if (i32.eq (local.get $idx) (i32.const 3)) (then (local.set $q3 (local.get $param))))
                (if (i32.or (i32.or (i32.eq (local.get $param) (i32.const 47)) (i32.eq (local.get $param) (i32.const 1047)))
                            (i32.eq (local.get $param) (i32.const 1049)))
                  (then (local.set $alt (i32.const 1))))
                (if (i32.eqz (local.get $prefix))
                  (then
                    (if (i32.or (i32.eq (local.get $d) (i32.const 0x4b)) (i32.eq (local.get $d) (i32.const 0x4a))) ;; K: EL, J: ED
                      (then
                        (local.set $k (select (i32.const 0) (local.get $p0) (i32.lt_s (local.get $p0) (i32.const 0))))
                        (if (i32.eqz (local.get $k))
                          (then
                            ;; Erase to the end of the line.
                            (if (i32.lt_u (local.get $cur) (local.get $out))
                              (then
                                (local.set $out (local.get $cur))
                                (local.set $l16 (local.get $c16))
                                (local.set $mod (i32.add (local.get $mod) (i32.const 1)))
                                (if (i32.eq (local.get $cur) (local.get $ls)) (then (local.set $la (i32.const 1))))))
                            (local.set $i (i32.add (local.get $j) (i32.const 1)))
                            (br $main)))
                        ;; ED 1 means nothing on one line; ED 2 and 3 need a screen.
                        (if (i32.eq (local.get $d) (i32.const 0x4a))
                          (then
                            (br_if $exit (i32.and (i32.ne (local.get $k) (i32.const 1)) (i32.eqz (local.get $quiet))))
                            (local.set $i (i32.add (local.get $j) (i32.const 1)))
                            (br $main)))
                        ;; EL 2 on column 0 empties the line; EL 1 and EL 2 elsewhere leave blank cells.
                        (if (i32.eq (local.get $k) (i32.const 2))
                          (then
                            (br_if $exit (i32.ne (local.get $cur) (local.get $ls)))
                            (local.set $out (local.get $ls))
                            (local.set $l16 (i32.const 0))
                            (local.set $la (i32.const 1))
                            (local.set $mod (i32.add (local.get $mod) (i32.const 1)))
                            (local.set $i (i32.add (local.get $j) (i32.const 1)))
                            (br $main)))
                        (br_if $exit (i32.eq (local.get $k) (i32.const 1)))
                        (local.set $i (i32.add (local.get $j) (i32.const 1)))
                        (br $main)))
                    ;; H f d r: cursor addressing, nothing to do without a screen.
                    (if (i32.and (local.get $quiet)
                                 (i32.or (i32.or (i32.eq (local.get $d) (i32.const 0x48)) (i32.eq (local.get $d) (i32.const 0x66)))
                                         (i32.or (i32.eq (local.get $d) (i32.const 0x64)) (i32.eq (local.get $d) (i32.const 0x72)))))
                      (then (local.set $i (i32.add (local.get $j) (i32.const 1))) (br $main)))
                    ;; A B C D G H f d r n c t h l: the parser's own dispatch (cursor, screen, queries, modes).
                    (br_if $exit (i32.lt_u (i32.sub (local.get $d) (i32.const 0x41)) (i32.const 4)))
                    (br_if $exit (i32.or (i32.or (i32.or (i32.eq (local.get $d) (i32.const 0x47)) (i32.eq (local.get $d) (i32.const 0x48)))
                                                 (i32.or (i32.eq (local.get $d) (i32.const 0x66)) (i32.eq (local.get $d) (i32.const 0x64))))
                                         (i32.or (i32.or (i32.or (i32.eq (local.get $d) (i32.const 0x72)) (i32.eq (local.get $d) (i32.const 0x6e)))
                                                         (i32.or (i32.eq (local.get $d) (i32.const 0x63)) (i32.eq (local.get $d) (i32.const 0x74))))
                                                 (i32.or (i32.eq (local.get $d) (i32.const 0x68)) (i32.eq (local.get $d) (i32.const 0x6c))))))
                    (local.set $i (i32.add (local.get $j) (i32.const 1)))
                    (br $main)))
                ;; A private prefix. DECSET/DECRST of up to four modes, no alternate screen: an event.
                (if (i32.and (i32.eq (local.get $prefix) (i32.const 0x3f))
                             (i32.or (i32.eq (local.get $d) (i32.const 0x68)) (i32.eq (local.get $d) (i32.const 0x6c))))
                  (then
                    (br_if $exit (i32.or (local.get $alt) (i32.gt_u (local.get $idx) (i32.const 3))))
                    (br_if $exit (i32.ge_u (local.get $ep) (local.get $eend)))
                    (i32.store (local.get $ep) (i32.const 3))
                    (i32.store offset=4 (local.get $ep) (i32.shr_u (i32.sub (local.get $lp) (local.get $lbase)) (i32.const 3)))
                    (i32.store offset=8 (local.get $ep) (i32.eq (local.get $d) (i32.const 0x68)))
                    (i32.store offset=12 (local.get $ep) (i32.add (local.get $idx) (i32.const 1)))
                    (i32.store offset=16 (local.get $ep) (local.get $p0))
                    (i32.store offset=20 (local.get $ep) (local.get $q1))
                    (i32.store offset=24 (local.get $ep) (local.get $q2))
                    (i32.store offset=28 (local.get $ep) (local.get $q3))
                    (local.set $ep (i32.add (local.get $ep) (i32.const 32)))
                    (local.set $i (i32.add (local.get $j) (i32.const 1)))
                    (br $main)))
                ;; Queries (DA2, XTVERSION, DECXCPR) go to the parser; the rest mean nothing here.
                (br_if $exit (i32.or (i32.or (i32.eq (local.get $d) (i32.const 0x63)) (i32.eq (local.get $d) (i32.const 0x71)))
                                     (i32.or (i32.eq (local.get $d) (i32.const 0x6e)) (i32.eq (local.get $d) (i32.const 0x70)))))
                (local.set $i (i32.add (local.get $j) (i32.const 1)))
                (br $main)))

            ;; ESC ]: an OSC on an empty line, its body free of controls, ended by BEL or ESC.
            (if (i32.eq (local.get $d) (i32.const 0x5d))
              (then
                (br_if $exit (i32.ne (local.get $out) (local.get $ls)))
                (local.set $j (i32.add (local.get $i) (i32.const 2)))
                (local.set $k (local.get $out))
                (local.set $w (i32.const 0))
                (block $body_end
                  (loop $body
                    (br_if $exit (i32.ge_u (local.get $j) (local.get $end)))
                    (local.set $c (i32.load8_u (local.get $j)))
                    (br_if $body_end (i32.lt_u (local.get $c) (i32.const 0x20)))
                    (i32.store8 (local.get $k) (local.get $c))
                    (local.set $k (i32.add (local.get $k) (i32.const 1)))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (if (i32.ge_u (local.get $c) (i32.const 0x80))
                      (then
                        (local.set $oa (i32.const 0))
                        ;; UTF-16 units: one per lead byte below F0, two per F0 and above.
                        (if (i32.ge_u (local.get $c) (i32.const 0xc0))
                          (then (local.set $w (i32.add (local.get $w) (select (i32.const 2) (i32.const 1) (i32.ge_u (local.get $c) (i32.const 0xf0)))))))
                        (br $body)))
                    (local.set $w (i32.add (local.get $w) (i32.const 1)))
                    (br $body)))
                (br_if $exit (i32.and (i32.ne (local.get $c) (i32.const 0x07)) (i32.ne (local.get $c) (i32.const 0x1b))))
                (br_if $exit (i32.gt_u (i32.sub (local.get $k) (local.get $out)) (local.get $maxSeq)))
                (br_if $exit (i32.ge_u (local.get $ep) (local.get $eend)))
                ;; OSC 10/11/12 `?` (a colour query) goes to the parser.
                (if (i32.eq (i32.sub (local.get $k) (local.get $out)) (i32.const 4))
                  (then
                    (br_if $exit (i32.and (i32.eq (i32.load8_u (local.get $out)) (i32.const 0x31))
                                          (i32.eq (i32.load16_u offset=2 (local.get $out)) (i32.const 0x3f3b))))))
                (i32.store (local.get $ep) (i32.const 2))
                (i32.store offset=4 (local.get $ep) (i32.shr_u (i32.sub (local.get $lp) (local.get $lbase)) (i32.const 3)))
                (i32.store offset=8 (local.get $ep) (local.get $ls16))
                (i32.store offset=12 (local.get $ep) (i32.add (local.get $ls16) (local.get $w)))
                (i32.store offset=16 (local.get $ep) (i32.eq (local.get $c) (i32.const 0x1b)))
                (i32.store offset=20 (local.get $ep) (i32.add (local.get $j) (i32.const 1)))
                (local.set $ep (i32.add (local.get $ep) (i32.const 32)))
                ;; The payload stays in OUT, before the line, which starts after it.
                (local.set $ls16 (i32.add (local.get $ls16) (local.get $w)))
                (local.set $out (local.get $k))
                (local.set $ls (local.get $k))
                (local.set $cur (local.get $k))
                ;; After BEL the string is over; an ESC is parsed as the escape it begins.
                (local.set $i (select (i32.add (local.get $j) (i32.const 1)) (local.get $j) (i32.eq (local.get $c) (i32.const 0x07))))
                (br $main)))

            ;; ESC P, X, ^, _: a string the parser ignores, up to ESC (or CAN, SUB). A body with a
            ;; line break that anything but ST ends goes to the parser, which shows it.
            (if (i32.or (i32.or (i32.eq (local.get $d) (i32.const 0x50)) (i32.eq (local.get $d) (i32.const 0x58)))
                        (i32.or (i32.eq (local.get $d) (i32.const 0x5e)) (i32.eq (local.get $d) (i32.const 0x5f))))
              (then
                (local.set $j (i32.add (local.get $i) (i32.const 2)))
                (local.set $w (i32.const 0))
                (block $string_end
                  (loop $string
                    (br_if $exit (i32.ge_u (local.get $j) (local.get $end)))
                    (local.set $c (i32.load8_u (local.get $j)))
                    (if (i32.lt_u (local.get $c) (i32.const 0x20))
                      (then
                        (br_if $string_end (i32.eq (local.get $c) (i32.const 0x1b)))
                        (br_if $string_end (i32.or (i32.eq (local.get $c) (i32.const 0x18)) (i32.eq (local.get $c) (i32.const 0x1a))))
                        (if (i32.or (i32.eq (local.get $c) (i32.const 0x0a)) (i32.eq (local.get $c) (i32.const 0x0d)))
                          (then (local.set $w (i32.const 1))))))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (br $string)))
                (if (local.get $w)
                  (then
                    (br_if $exit (i32.ne (local.get $c) (i32.const 0x1b)))
                    (br_if $exit (i32.ge_u (i32.add (local.get $j) (i32.const 1)) (local.get $end)))
                    (br_if $exit (i32.ne (i32.load8_u offset=1 (local.get $j)) (i32.const 0x5c)))))
                (br_if $exit (i32.gt_u (i32.sub (i32.sub (local.get $j) (local.get $i)) (i32.const 2)) (local.get $maxSeq)))
                ;; CAN and SUB end it and are consumed; an ESC is parsed as the escape it begins.
                (local.set $i (select (local.get $j) (i32.add (local.get $j) (i32.const 1)) (i32.eq (local.get $c) (i32.const 0x1b))))
                (br $main)))

            ;; ESC, one intermediate, a final byte: dropped (ESC ( B).
            (if (i32.lt_u (i32.sub (local.get $d) (i32.const 0x20)) (i32.const 0x10))
              (then
                (br_if $exit (i32.ge_u (i32.add (local.get $i) (i32.const 2)) (local.get $end)))
                (br_if $exit (i32.gt_u (i32.sub (i32.load8_u offset=2 (local.get $i)) (i32.const 0x30)) (i32.const 0x4e)))
                (local.set $i (i32.add (local.get $i) (i32.const 3)))
                (br $main)))
            ;; ESC and a final byte (ESC 7, ESC 8, ESC \): dropped; ESC = and ESC > switch the keypad, ESC M moves up, ESC c resets.
            (br_if $exit (i32.gt_u (i32.sub (local.get $d) (i32.const 0x30)) (i32.const 0x4e)))
            (br_if $exit (i32.or (i32.or (i32.eq (local.get $d) (i32.const 0x3d)) (i32.eq (local.get $d) (i32.const 0x3e)))
                                 (i32.or (i32.eq (local.get $d) (i32.const 0x4d)) (i32.eq (local.get $d) (i32.const 0x63)))))
            (local.set $i (i32.add (local.get $i) (i32.const 2)))
            (br $main)))

        ;; Printable ASCII (0x20-0x7E) and TAB.
        (if (i32.or (i32.lt_u (i32.sub (local.get $c) (i32.const 0x20)) (i32.const 0x5f))
                    (i32.eq (local.get $c) (i32.const 0x09)))
          (then
            (if (i32.eq (local.get $cur) (local.get $out))
              (then
                ;; Appending: one loop over the run of printable ASCII.
                (local.set $stop (i32.const 0))
                (block $run_end
                  (loop $run
                    (if (i32.ge_u (local.get $l16) (local.get $max16))
                      (then (local.set $stop (i32.const 1)) (br $run_end)))
                    (i32.store8 (local.get $out) (local.get $c))
                    (local.set $out (i32.add (local.get $out) (i32.const 1)))
                    (local.set $l16 (i32.add (local.get $l16) (i32.const 1)))
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_if $run_end (i32.ge_u (local.get $i) (local.get $end)))
                    (local.set $c (i32.load8_u (local.get $i)))
                    (br_if $run (i32.lt_u (i32.sub (local.get $c) (i32.const 0x20)) (i32.const 0x5f)))))
                (local.set $cur (local.get $out))
                (local.set $c16 (local.get $l16))
                (br_if $exit (local.get $stop))
                (br $main)))
            ;; Left of the end: one ASCII byte over another on an ASCII-only line.
            (br_if $exit (i32.eqz (local.get $la)))
            (i32.store8 (local.get $cur) (local.get $c))
            (local.set $cur (i32.add (local.get $cur) (i32.const 1)))
            (local.set $c16 (i32.add (local.get $c16) (i32.const 1)))
            (local.set $mod (i32.add (local.get $mod) (i32.const 1)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $main)))

        ;; A UTF-8 sequence (the input is valid UTF-8, so a lead byte here begins a whole one).
        (if (i32.ge_u (local.get $c) (i32.const 0x80))
          (then
            (br_if $exit (i32.lt_u (local.get $c) (i32.const 0xc2)))
            (if (i32.eq (local.get $c) (i32.const 0xc2))
              (then
                (if (i32.le_u (i32.load8_u (i32.add (local.get $i) (i32.const 1))) (i32.const 0x9f))
                  (then
                    ;; A C1 control: dropped.
                    (local.set $i (i32.add (local.get $i) (i32.const 2)))
                    (br $main)))))
            (br_if $exit (i32.ne (local.get $cur) (local.get $out)))
            (local.set $len
              (select (i32.const 2)
                (select (i32.const 3) (i32.const 4) (i32.lt_u (local.get $c) (i32.const 0xf0)))
                (i32.lt_u (local.get $c) (i32.const 0xe0))))
            (local.set $w (select (i32.const 2) (i32.const 1) (i32.eq (local.get $len) (i32.const 4))))
            (br_if $exit (i32.gt_u (i32.add (local.get $l16) (local.get $w)) (local.get $max16)))
            (if (i32.eq (local.get $len) (i32.const 4))
              (then (i32.store (local.get $out) (i32.load (local.get $i))))
              (else
                (i32.store16 (local.get $out) (i32.load16_u (local.get $i)))
                (if (i32.eq (local.get $len) (i32.const 3))
                  (then (i32.store8 offset=2 (local.get $out) (i32.load8_u offset=2 (local.get $i)))))))
            (local.set $out (i32.add (local.get $out) (local.get $len)))
            (local.set $cur (local.get $out))
            (local.set $i (i32.add (local.get $i) (local.get $len)))
            (local.set $l16 (i32.add (local.get $l16) (local.get $w)))
            (local.set $c16 (local.get $l16))
            (local.set $la (i32.const 0))
            (local.set $oa (i32.const 0))
            (br $main)))

        ;; CR: a line end when LF follows, else the cursor to the line start.
        (if (i32.eq (local.get $c) (i32.const 0x0d))
          (then
            (if (i32.and (i32.lt_u (i32.add (local.get $i) (i32.const 1)) (local.get $end))
                         (i32.eq (i32.load8_u offset=1 (local.get $i)) (i32.const 0x0a)))
              (then (local.set $i (i32.add (local.get $i) (i32.const 1))) (local.set $c (i32.const 0x0a)))
              (else
                (local.set $cur (local.get $ls))
                (local.set $c16 (i32.const 0))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $main)))))

        ;; LF: commit the line.
        (if (i32.eq (local.get $c) (i32.const 0x0a))
          (then
            (br_if $exit (i32.ge_u (local.get $lp) (local.get $lend)))
            (i32.store (local.get $lp) (local.get $ls16))
            (i32.store offset=4 (local.get $lp) (i32.add (local.get $ls16) (local.get $l16)))
            (local.set $lp (i32.add (local.get $lp) (i32.const 8)))
            (local.set $ls16 (i32.add (local.get $ls16) (local.get $l16)))
            (local.set $l16 (i32.const 0))
            (local.set $c16 (i32.const 0))
            (local.set $ls (local.get $out))
            (local.set $cur (local.get $out))
            (local.set $la (i32.const 1))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $main)))

        ;; BS: one code point left, stopping at the line start.
        (if (i32.eq (local.get $c) (i32.const 0x08))
          (then
            (if (i32.gt_u (local.get $cur) (local.get $ls))
              (then
                (local.set $k (i32.sub (local.get $cur) (i32.const 1)))
                (block $lead
                  (loop $back
                    (br_if $lead (i32.ne (i32.and (i32.load8_u (local.get $k)) (i32.const 0xc0)) (i32.const 0x80)))
                    (local.set $k (i32.sub (local.get $k) (i32.const 1)))
                    (br $back)))
                (local.set $c16 (i32.sub (local.get $c16)
                  (select (i32.const 2) (i32.const 1) (i32.eq (i32.sub (local.get $cur) (local.get $k)) (i32.const 4)))))
                (local.set $cur (local.get $k))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $main)))

        ;; Every other control in the ground state (BEL, VT, FF, CAN, SUB, DEL, …) is dropped.
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $main)))

    (i32.store (i32.const 0) (local.get $i))
    (i32.store (i32.const 8) (local.get $out))
    (i32.store (i32.const 12) (local.get $ls))
    (i32.store (i32.const 16) (local.get $cur))
    (i32.store (i32.const 20) (local.get $la))
    (i32.store (i32.const 24) (local.get $ls16))
    (i32.store (i32.const 28) (local.get $l16))
    (i32.store (i32.const 32) (local.get $c16))
    (i32.store (i32.const 44) (local.get $lp))
    (i32.store (i32.const 48) (local.get $ep))
    (i32.store (i32.const 52) (local.get $oa))
    (i32.store (i32.const 56) (local.get $mod))))
