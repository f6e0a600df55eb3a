//! The plugin ABIs kern-profile is built for. QEMU 11.1 (plugin API 7) changed every
//! lifetime callback's signature in place: no plugin id, a trailing `userdata` pointer, and a
//! `userdata` argument to each registration. Everything else the plugin calls kept its
//! signature, so the glue is shared and only the registrations differ (`abi/v4.rs`,
//! `abi/v7.rs`); each `.so` (plugin/api4, plugin/api7) is [`crate::export_plugin!`] of one
//! [`Api`].
//!
//! A build that a QEMU will refuse cannot say so from `qemu_plugin_install` (QEMU checks the
//! API level first), so each build also runs [`check_fit`] when QEMU opens its file.

use std::sync::OnceLock;

use kern_profile_format::qemu::{misfit_message, parse_qemu_version, Build};
use qemu_plugin_sys as sys;

mod v4;
mod v7;

/// A plugin ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// QEMU 9.2 to 11.0.
    V4,
    /// QEMU 11.1 and later.
    V7,
}

impl Api {
    /// Its `qemu_plugin_version`.
    pub const fn level(self) -> i32 {
        match self {
            Api::V4 => 4,
            Api::V7 => 7,
        }
    }

    /// Its build in `kern_profile_format::qemu::BUILDS`.
    pub fn build(self) -> &'static Build {
        Build::for_api(self.level()).expect("every Api has a build")
    }

    /// Registers the plugin's lifetime callbacks (vCPU init, idle, resume, exit) and, with
    /// `translate`, the translation callback.
    ///
    /// # Safety
    /// From `qemu_plugin_install`, with this plugin's id, on a QEMU of this ABI.
    pub unsafe fn register_callbacks(self, id: sys::qemu_plugin_id_t, translate: bool) {
        match self {
            Api::V4 => v4::register(id, translate),
            Api::V7 => v7::register(id, translate),
        }
    }

    /// Registers the discontinuity callback for interrupts (`trigger=interrupt`), when this
    /// QEMU has one ([`has_discon`]). Not for exceptions: they happen at the instructions that
    /// cause them, so a tick's sample would wait for the next system call or page fault and
    /// land on it (on Debian's arm64 Linux, whose UART output runs with interrupts masked,
    /// the kernel got 8% of the samples that way, against 65% by host time with `delay=`;
    /// 70% at interrupts alone).
    ///
    /// # Safety
    /// As [`Api::register_callbacks`].
    pub unsafe fn register_discon(self, id: sys::qemu_plugin_id_t) {
        let f = discon_registration();
        if f.is_null() {
            return;
        }
        match self {
            Api::V4 => v4::register_discon(id, f),
            Api::V7 => v7::register_discon(id, f),
        }
    }
}

/// QEMU's `qemu_plugin_register_vcpu_discon_cb`, or null before QEMU 10.2. Looked up at run
/// time: a plugin that named it at link time would not load on QEMU 9.2 to 10.1.
fn discon_registration() -> *mut std::ffi::c_void {
    // SAFETY: a plain symbol look-up.
    unsafe {
        dlsym(
            std::ptr::null_mut(),
            c"qemu_plugin_register_vcpu_discon_cb".as_ptr(),
        )
    }
}

/// Whether this QEMU has the discontinuity callback (10.2 and later).
pub fn has_discon() -> bool {
    !discon_registration().is_null()
}

/// `enum qemu_plugin_discon_type` (QEMU 10.2): interrupts (exceptions are 2, host calls 4).
pub const DISCON_INTERRUPT: std::ffi::c_int = 1;

extern "C" {
    /// The C library's; `RTLD_DEFAULT` (null) searches QEMU's own exported symbols.
    fn dlsym(
        handle: *mut std::ffi::c_void,
        symbol: *const std::ffi::c_char,
    ) -> *mut std::ffi::c_void;
}

/// The running QEMU's version, found once: in its own read-only data, where its `--version`
/// text is one string literal, else by running `/proc/self/exe --version` (20 to 100 ms: a
/// whole QEMU starting, too much to pay at every load of a plugin meant to cost 2%).
pub fn running_qemu_version() -> Option<&'static str> {
    static VERSION: OnceLock<Option<String>> = OnceLock::new();
    VERSION
        .get_or_init(|| {
            crate::qemu_version::from_own_image().or_else(|| {
                let out = std::process::Command::new("/proc/self/exe")
                    .arg("--version")
                    .stdin(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .output()
                    .ok()?;
                parse_qemu_version(&String::from_utf8_lossy(&out.stdout)).map(String::from)
            })
        })
        .as_deref()
}

/// When QEMU opens the file: a build this QEMU will refuse says which build it loads, before
/// QEMU's own "plugin requires API version N" message. Silent inside anything but QEMU.
pub fn check_fit(api: Api) {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    let is_qemu = exe
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("qemu-system-"));
    if !is_qemu {
        return;
    }
    if let Some(msg) = running_qemu_version().and_then(|v| misfit_message(api.build(), v)) {
        crate::stderr_line(&msg);
    }
}

/// The exported symbols of one plugin build: QEMU's `qemu_plugin_version` and
/// `qemu_plugin_install`, kern-profile's version string (which `kern-profile record` reads),
/// and the fit check run when QEMU opens the file.
#[macro_export]
macro_rules! export_plugin {
    ($api:ident) => {
        /// The plugin API version this build is for (QEMU reads this symbol).
        #[no_mangle]
        pub static qemu_plugin_version: ::std::ffi::c_int = $crate::abi::Api::$api.level();

        /// Which kern-profile this plugin belongs to, NUL-terminated: `kern-profile record`
        /// reads it from the dynamic symbol table (without loading the plugin) and uses only a
        /// plugin of its own version.
        #[no_mangle]
        pub static kern_profile_plugin_version: [u8; $crate::PLUGIN_ID.len()] =
            $crate::bytes_of($crate::PLUGIN_ID);

        /// # Safety
        /// Called by QEMU once, with a valid `info` and `argc` C strings in `argv`.
        #[no_mangle]
        pub unsafe extern "C" fn qemu_plugin_install(
            id: $crate::sys::qemu_plugin_id_t,
            info: *const $crate::sys::qemu_info_t,
            argc: ::std::ffi::c_int,
            argv: *mut *mut ::std::ffi::c_char,
        ) -> ::std::ffi::c_int {
            // SAFETY: as QEMU promises.
            unsafe { $crate::install_entry($crate::abi::Api::$api, id, info, argc, argv) }
        }

        // Runs when QEMU opens the file, before it compares API levels.
        #[used]
        #[link_section = ".init_array"]
        static KERN_PROFILE_FIT_CHECK: extern "C" fn() = {
            extern "C" fn fit_check() {
                $crate::guard(|| $crate::abi::check_fit($crate::abi::Api::$api));
            }
            fit_check
        };
    };
}
