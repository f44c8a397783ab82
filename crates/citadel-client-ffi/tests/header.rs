//! The checked-in C header `include/citadel.h` matches what cbindgen
//! generates from the sources. Regenerate it with
//! `CITADEL_BLESS_HEADER=1 cargo test -p citadel-client-ffi --test header`.

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let path = crate_dir.join("include/citadel.h");
    if std::env::var_os("CITADEL_BLESS_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write include/citadel.h");
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/citadel.h is stale: run CITADEL_BLESS_HEADER=1 cargo test -p citadel-client-ffi --test header"
    );
}
