//! End-to-end test support; the tests live in tests/.
