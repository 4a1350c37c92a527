#include "textflag.h"

// func rawCloneInit(trap, a1, a2 uintptr, arena unsafe.Pointer, role uintptr) (r1, errno uintptr)
// func rawCloneCmd(trap, a1, a2 uintptr, arena unsafe.Pointer, role uintptr) (r1, errno uintptr)
//
// Makes system call trap (clone or clone3) with a1 and a2. The parent
// returns the result. The child, which the kernel started on the stack
// that a1 or a2 names, calls rawInitEntry or rawCmdEntry (arena, role) there and exits with
// status 127 should it return; it never returns into Go code of the
// parent's stack.
TEXT ·rawCloneInit(SB),NOSPLIT|NOFRAME,$0-56
	MOVQ	trap+0(FP), AX
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	$0, DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	arena+24(FP), R12
	MOVQ	role+32(FP), R13
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, r1+40(FP)
	NEGQ	AX
	MOVQ	AX, errno+48(FP)
	RET
ok:
	MOVQ	AX, r1+40(FP)
	MOVQ	$0, errno+48(FP)
	RET
child:
	// The kernel preserved R12 and R13; SP is the new stack.
	ANDQ	$~15, SP
	SUBQ	$32, SP
	MOVQ	R12, 0(SP)
	MOVQ	R13, 8(SP)
	CALL	·rawInitEntry(SB)
	MOVL	$127, DI
	MOVL	$231, AX // exit_group
	SYSCALL
	INT	$3

TEXT ·rawCloneCmd(SB),NOSPLIT|NOFRAME,$0-56
	MOVQ	trap+0(FP), AX
	MOVQ	a1+8(FP), DI
	MOVQ	a2+16(FP), SI
	MOVQ	$0, DX
	MOVQ	$0, R10
	MOVQ	$0, R8
	MOVQ	arena+24(FP), R12
	MOVQ	role+32(FP), R13
	SYSCALL
	CMPQ	AX, $0
	JEQ	child
	CMPQ	AX, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, r1+40(FP)
	NEGQ	AX
	MOVQ	AX, errno+48(FP)
	RET
ok:
	MOVQ	AX, r1+40(FP)
	MOVQ	$0, errno+48(FP)
	RET
child:
	// The kernel preserved R12 and R13; SP is the new stack.
	ANDQ	$~15, SP
	SUBQ	$32, SP
	MOVQ	R12, 0(SP)
	MOVQ	R13, 8(SP)
	CALL	·rawCmdEntry(SB)
	MOVL	$127, DI
	MOVL	$231, AX // exit_group
	SYSCALL
	INT	$3
