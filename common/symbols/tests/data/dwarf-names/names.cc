// kern-profile's DWARF-name test: functions whose linkage names are in no mangling scheme
// (asm labels), in a namespace, a class and at file scope.
namespace drivers {
namespace net {
int poll(int n) __asm__("net$poll");
int poll(int n) { return n * 7 + 1; }
}  // namespace drivers::net
}  // namespace drivers

struct Queue {
    int n;
    int push(int v) __asm__("Queue$push");
};
int Queue::push(int v) { return n += v; }

extern "C" int helper(int x) __asm__("helper$1");
extern "C" int helper(int x) { return x ^ 0x55; }

extern "C" void _start() {
    Queue q{0};
    volatile int sink = drivers::net::poll(3) + q.push(4) + helper(5);
    (void)sink;
    for (;;) {}
}
