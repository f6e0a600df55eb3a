//! kern-profile's QEMU plugin for plugin API 4: QEMU 9.2 to 11.0 (installed as
//! `kern-profile.so`). Everything but the exported symbols is `kern-profile-plugin`.

kern_profile_plugin::export_plugin!(V4);
