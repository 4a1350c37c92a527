#include "textflag.h"

// func rawClone(trap, a1, a2 uintptr, arena unsafe.Pointer, role, fn uintptr) (r1, errno uintptr)
//
// Makes system call trap (clone or clone3) with a1 and a2. The parent
// returns the result. The child, which the kernel started on the stack
// that a1 or a2 names, calls the Go function at fn (ABIInternal: arena in
// AX, role in BX, X15 zero, and no g: R14 is zero, so that the function,
// which must be nosplit and norace, cannot use one by mistake) and exits
// with status 127 should it return. Calling fn directly rather than
// through an ABI0 wrapper keeps the race detector's instrumentation of
// wrappers out of the child.
TEXT ·rawClone(SB),NOSPLIT|NOFRAME,$0-64
	MOVQ	trap+0(FP), AX
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	$0, DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	arena+24(FP), R12
	MOVQ	role+32(FP), R13
	MOVQ	fn+40(FP), R9
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, r1+48(FP)
	NEGQ	AX
	MOVQ	AX, errno+56(FP)
	RET
ok:
	MOVQ	AX, r1+48(FP)
	MOVQ	$0, errno+56(FP)
	RET
child:
	// The kernel preserved R9, R12 and R13; SP is the new stack.
	ANDQ	$~15, SP
	MOVQ	R12, AX
	MOVQ	R13, BX
	XORPS	X15, X15
	XORQ	R14, R14
	CALL	R9
	MOVL	$127, DI
	MOVL	$231, AX // exit_group
	SYSCALL
	INT	$3
