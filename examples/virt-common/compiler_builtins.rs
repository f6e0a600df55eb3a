//! A stand-in for the `compiler_builtins` crate, which rustc links into every binary and
//! Debian does not ship for the none targets. Empty: the kernels call no intrinsic it would
//! provide (the memory functions are in mem.rs; ld names any missing symbol).
#![no_std]
#![allow(internal_features)]
#![feature(compiler_builtins)]
#![compiler_builtins]
