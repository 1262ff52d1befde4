//! Decodes the defmt frames a kernel wrote (the bytes QEMU saved from its
//! COM2, see `hobby::defmt_serial`) with the format table in the kernel's
//! ELF, on the pinned `defmt-decoder` library: one message per frame.
//! `pmu-qemu-host` calls [`decode`] for every kernel that logs with defmt;
//! the `pmu-defmt-decode` program prints the same for people.

use defmt_decoder::{DecodeError, Table};

/// The messages of the frames in `frames`, decoded with the table in the
/// ELF image `elf`, in order. Fails on a missing table or a malformed
/// frame; a frame cut short at the end ends the stream.
pub fn decode(elf: &[u8], frames: &[u8]) -> Result<Vec<String>, String> {
    let table = Table::parse(elf)
        .map_err(|e| format!("reading the defmt table: {e}"))?
        .ok_or("the kernel has no .defmt section: it does not log with defmt")?;
    let mut stream = table.new_stream_decoder();
    stream.received(frames);
    let mut messages = Vec::new();
    loop {
        match stream.decode() {
            Ok(frame) => messages.push(frame.display_message().to_string()),
            Err(DecodeError::UnexpectedEof) => return Ok(messages),
            Err(DecodeError::Malformed) => return Err("a malformed frame".into()),
        }
    }
}
