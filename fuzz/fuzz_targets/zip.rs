//! The zip reader alone: parse the central directory, then for every entry
//! find its data, read it (within the reader's limits) and check its CRC.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stowage::serialize::zip::ZipReader;

fuzz_target!(|data: &[u8]| {
    let Ok(zip) = ZipReader::new(data, &Default::default()) else {
        return;
    };
    let _ = zip.root();
    for e in zip.entries() {
        let _ = zip.find(&e.name);
        let _ = zip.data_offset(e);
        let _ = zip.read_to_vec(e);
        let _ = zip.check_crc(e);
    }
});
