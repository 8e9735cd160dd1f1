/* Program entry for gpu-info on x86-64, in place of the C library's
 * Scrt1.o. That one calls __libc_start_main@GLIBC_2.34, which the loader
 * of an image with an older glibc refuses, so gpu-info could not run
 * there (src/gpuabi/glibc_compat.h says why that matters). This entry calls
 * the version every x86-64 glibc has; it passes no init or fini function
 * (gpu-info has no constructors or destructors of its own: the libraries
 * it loads run theirs as always).
 *
 * On entry (x86-64 psABI): %rdx holds the loader's finalizer, the stack
 * holds argc, then argv. */
	.symver __libc_start_main, __libc_start_main@GLIBC_2.2.5
	.text
	.globl _start
	.type _start, @function
_start:
	xor %ebp, %ebp                  /* the outermost frame */
	mov %rdx, %r9                   /* rtld_fini */
	pop %rsi                        /* argc */
	mov %rsp, %rdx                  /* argv */
	and $-16, %rsp                  /* the ABI's call alignment... */
	push %rax                       /* ...kept across the push below */
	push %rsp                       /* stack_end */
	xor %r8d, %r8d                  /* fini: none */
	xor %ecx, %ecx                  /* init: none */
	lea main(%rip), %rdi
	call *__libc_start_main@GOTPCREL(%rip)
	hlt                             /* __libc_start_main does not return */
	.size _start, . - _start
	.section .note.GNU-stack, "", @progbits
