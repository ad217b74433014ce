//! The zip reader alone (the crate `stowage-zip`): parse the central
//! directory, then for every entry look it up by its record name under the
//! root folder (`find`, and `position_near` from hints around it, which must
//! agree with `position`), find its data, read it (within the reader's
//! limits) and check its CRC.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stowage_zip::ZipReader;

fuzz_target!(|data: &[u8]| {
    let Ok(zip) = ZipReader::new(data, &Default::default()) else {
        return;
    };
    let root = zip.root();
    for (i, e) in zip.entries().iter().enumerate() {
        // `find` takes the name under the root folder (`data/0`), as loaders
        // call it; entries outside the root cannot be found that way.
        let record = zip
            .name(e)
            .strip_prefix(root)
            .and_then(|rest| rest.strip_prefix('/'));
        if let Some(record) = record {
            let found = zip.find(record).expect("an entry under the root is found");
            assert_eq!(zip.name(found), zip.name(e));
            let at = zip.position(record);
            for hint in [i, i + 1, i.saturating_sub(1), 0] {
                assert_eq!(zip.position_near(record, hint), at, "{record} near {hint}");
            }
        }
        let _ = zip.data_offset(e);
        let _ = zip.read_to_vec(e);
        let _ = zip.check_crc(e);
    }
});
