//! kern-profile's QEMU plugin for plugin API 7: QEMU 11.1 and later (installed as
//! `kern-profile-api7.so`). Everything but the exported symbols is `kern-profile-plugin`.

kern_profile_plugin::export_plugin!(V7);
