/* A tiny freestanding i386 program for kern-profile's aggregator tests: a call chain
 * (_start -> middle -> leaf), a function inlined into leaf (square), and a function whose
 * linker name is a mangled Rust name (kernel::work). Rebuild with ./build-tiny.sh. */

static inline __attribute__((always_inline)) int square(int x)
{
	return x * x + (x >> 3);
}

__attribute__((noinline)) int leaf(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += square(i ^ s);
	return s;
}

__attribute__((noinline)) int middle(int n)
{
	return leaf(n) + 1;
}

/* A Rust-style mangled linker name: the symbol table says kernel::work. */
__attribute__((noinline)) int work(int n) __asm__("_ZN6kernel4work17h0123456789abcdefE");
__attribute__((noinline)) int work(int n)
{
	return middle(n) * 3;
}

void _start(void)
{
	volatile int r = work(10);
	(void)r;
	for (;;)
		;
}
