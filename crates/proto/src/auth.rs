//! Packet authentication and integrity: the one place where a packet's
//! trailer (a MAC, or a CRC32C checksum) is computed on every packet sent
//! and verified on every packet received.
//!
//! Owns: [`AuthKey`] (the per-job MAC key, derived from the job key),
//! [`job_id_from_key`] (the public job identity on the wire), [`seal`] and
//! [`seal_parts`] (one of them called exactly once per emitted packet, by
//! `Endpoint::poll_transmit`, `Endpoint::poll_transmit_parts`,
//! `Endpoint::encode_raw` and `Endpoint::encode_mcast`), [`check_checksum`]
//! (called first on every received datagram, before its header is parsed:
//! with checksums on, no field but magic and version is read from a
//! corrupted packet) and [`verify`] (called exactly once per received
//! datagram after the header parses and the job id matches, before any
//! other field is trusted).
//!
//! Must not: know about sequence numbers, acks or peers. Replay protection is
//! not done here: a MAC only proves a packet was built by a holder of the job
//! key; the sequence numbers and epochs that the MAC covers make a replayed
//! copy a duplicate or a stale-epoch packet, which the endpoint drops.
//!
//! # The MAC
//!
//! POLYVAL, then AES-128: the tag is `AES_k(POLYVAL_h(header ‖ payload ‖
//! zero padding to 16 bytes ‖ length block))`, where the length block holds
//! the authenticated length in bits (little-endian u64, then 8 zero bytes)
//! and the header has the `MAC` flag already set, so stripping the trailer is
//! detected. This is AES-GCM-SIV's tag (RFC 8452 §4) without its per-nonce
//! key derivation, i.e. the classic "universal hash, then PRF" MAC: POLYVAL
//! with the length block is ε-almost-universal with ε = ℓ/2^128 for messages
//! of at most ℓ blocks, and AES under a secret key is a PRF up to the
//! birthday bound, so the composition is a deterministic PRF and needs no
//! nonce. That matters here: retransmissions and acks reuse sequence
//! numbers, which would break a nonce-based authenticator such as GMAC or
//! bare Poly1305 (two different packets under one nonce reveal the hash
//! key). A forger's chance per try is about ℓ/2^128 (ℓ ≤ 4,100 blocks for
//! the largest datagram); over q packets sealed under one key the bound
//! grows as q²·ℓ/2^128, about 2^-40 after 2^40 LAN packets (1.5 PB), far
//! beyond any job. Both keys come from the 32-byte key by
//! `blake3::derive_key` under their own contexts, and that key is
//! `blake3::derive_key(MAC_CONTEXT, job_key)`; the job id on the wire is
//! derived the same way under another context, so none reveals anything
//! about the others or the job key.
//!
//! Why not keyed BLAKE3 (the first MAC): a single 1 KiB chunk compresses
//! serially, so on datagrams of a packet's size it was slow enough to take
//! a large share of both CPUs in a bulk put between hosts (measurements:
//! docs/perf-notes.md, "packet MAC"); POLYVAL runs on
//! the carry-less multiplier (`mw_mac`: PCLMULQDQ detected at run time,
//! four blocks per reduction; the `polyval` crate's constant-time code
//! elsewhere) and AES on AES-NI (the `aes` crate, also detected).

use crate::{Config, DropReason};
use aes::cipher::{BlockEncrypt, KeyInit};
use mw_wire::{Flags, Header, HeaderRepr, PacketType, CHECKSUM_LEN, HEADER_LEN, MAC_LEN};

/// Bytes any packet's trailer may take: `MAC_LEN` with authentication,
/// `CHECKSUM_LEN` with checksums, 0 without. Size buffers for the largest.
pub const TRAILER_RESERVE: usize = MAC_LEN;

/// BLAKE3 `derive_key` context for the packet MAC key (never change it
/// without bumping the wire version: ranks would reject each other).
const MAC_CONTEXT: &str = "memwire 2025-01 packet MAC key v1";
/// BLAKE3 `derive_key` context for the key of epoch proofs without
/// authentication (`Config::epoch_key`): not the MAC key, so that ranks
/// that disagree on authentication still reject each other's packets.
const EPOCH_PROOF_CONTEXT: &str = "memwire 2026-12 epoch proof key v1";
/// BLAKE3 `derive_key` context for the job id carried in every header.
const JOB_ID_CONTEXT: &str = "memwire 2025-01 job id v1";
/// BLAKE3 `derive_key` contexts of the MAC's two subkeys, from the MAC key.
const POLYVAL_KEY_CONTEXT: &str = "memwire 2026-11 packet MAC POLYVAL key v2";
const AES_KEY_CONTEXT: &str = "memwire 2026-11 packet MAC AES-128 key v2";

/// The key that authenticates a job's packets. Every rank of the job must
/// hold the same one. Its `Debug` output never shows the key.
#[derive(Clone)]
pub struct AuthKey {
    /// The 32-byte key both subkeys derive from (what equality compares).
    bytes: [u8; 32],
    /// POLYVAL's key: the hash subkey.
    hash: mw_mac::PolyvalKey,
    /// AES-128 under the PRF subkey.
    prf: aes::Aes128,
}

impl PartialEq for AuthKey {
    fn eq(&self, other: &AuthKey) -> bool {
        constant_time_eq::constant_time_eq_32(&self.bytes, &other.bytes)
    }
}

impl Eq for AuthKey {}

impl AuthKey {
    /// The MAC key of the job whose 128-bit secret is `job_key`.
    pub fn from_job_key(job_key: &[u8; 16]) -> AuthKey {
        AuthKey::from_bytes(blake3::derive_key(MAC_CONTEXT, job_key))
    }

    /// The key that proves epochs (`Config::epoch_key`) in the job whose
    /// 128-bit secret is `job_key`; unrelated to its MAC key.
    pub fn epoch_proof_from_job_key(job_key: &[u8; 16]) -> AuthKey {
        AuthKey::from_bytes(blake3::derive_key(EPOCH_PROOF_CONTEXT, job_key))
    }

    /// A key given directly (tests, or a caller with its own key schedule).
    pub fn from_bytes(key: [u8; 32]) -> AuthKey {
        let hash_key = blake3::derive_key(POLYVAL_KEY_CONTEXT, &key);
        let prf_key = blake3::derive_key(AES_KEY_CONTEXT, &key);
        AuthKey {
            bytes: key,
            hash: mw_mac::PolyvalKey::new(hash_key[..16].try_into().expect("16 bytes")),
            prf: aes::Aes128::new(aes::cipher::Key::<aes::Aes128>::from_slice(&prf_key[..16])),
        }
    }

    /// The MAC of a packet whose authenticated bytes (header, with the `MAC`
    /// flag already set, and payload) are `authenticated`; the packet's
    /// trailer. For tools that build packets by hand (fuzzers, tests).
    pub fn tag(&self, authenticated: &[u8]) -> [u8; MAC_LEN] {
        self.tag_parts(&[authenticated])
    }

    /// [`tag`](Self::tag) of the concatenation of `parts`.
    fn tag_parts(&self, parts: &[&[u8]]) -> [u8; MAC_LEN] {
        let mut hash = self.hash.start();
        let mut carry = [0u8; 16];
        let mut carried = 0;
        let mut total = 0u64;
        for mut part in parts.iter().copied() {
            total += part.len() as u64;
            if carried > 0 {
                let take = part.len().min(16 - carried);
                carry[carried..carried + take].copy_from_slice(&part[..take]);
                carried += take;
                part = &part[take..];
                if carried < 16 {
                    continue;
                }
                hash.update_block(&carry);
            }
            let whole = part.len() / 16 * 16;
            hash.update_blocks(&part[..whole]);
            let rest = &part[whole..];
            carry[..rest.len()].copy_from_slice(rest);
            carried = rest.len();
        }
        if carried > 0 {
            carry[carried..].fill(0);
            hash.update_block(&carry);
        }
        let mut lengths = [0u8; 16];
        lengths[..8].copy_from_slice(&(total * 8).to_le_bytes());
        hash.update_block(&lengths);
        let mut block = aes::Block::from(hash.finalize());
        self.prf.encrypt_block(&mut block);
        block.into()
    }
}

impl core::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("AuthKey(<redacted>)")
    }
}

/// The job id every packet of the job carries, from the job key: a PRF of
/// it, so a captured header tells nothing about the key.
pub fn job_id_from_key(job_key: &[u8; 16]) -> u64 {
    let derived = blake3::derive_key(JOB_ID_CONTEXT, job_key);
    let mut id = [0u8; 8];
    id.copy_from_slice(&derived[..8]);
    u64::from_le_bytes(id)
}

/// Trailer bytes to reserve in every packet under `config`: the MAC with
/// authentication, or when a packet may have to prove an epoch
/// ([`proves_epoch`]); else the checksum's, if any.
pub(crate) fn trailer_len(config: &Config) -> usize {
    if config.auth.is_some() || config.epoch_key.is_some() {
        MAC_LEN
    } else if config.checksum {
        CHECKSUM_LEN
    } else {
        0
    }
}

/// The key a packet whose header is `head` is sealed with: the job's MAC
/// key with authentication; without, `Config::epoch_key` for a packet that
/// announces its sender's epoch to a peer whose epoch the sender does not
/// know yet (destination epoch 0: the first packets of a connection, and
/// every packet of a restarted process until it hears back) and for a
/// Reset (a restarted process telling a peer so). Such packets are what
/// makes a receiver adopt a new epoch for a peer, so they must prove they
/// come from a holder of the job key (see `Endpoint::receive`). Multicast
/// segments never change an epoch and are left alone.
fn sealing_key<'a>(config: &'a Config, head: &[u8]) -> Option<&'a AuthKey> {
    if config.auth.is_some() {
        return config.auth.as_ref();
    }
    let key = config.epoch_key.as_ref()?;
    let header = Header::new_unchecked(head);
    let ptype = header.packet_type_raw();
    let announces = header.dst_epoch() == 0 || ptype == PacketType::Reset as u8;
    (announces && ptype != PacketType::Mcast as u8).then_some(key)
}

/// Finishes an emitted packet of `len` bytes in `buf` (header and payload
/// written, `buf` at least `len + trailer_len(config)` long): sets the
/// trailer's flag, appends the MAC or checksum over header and payload, and
/// returns the final length, trailer included.
pub(crate) fn seal(config: &Config, buf: &mut [u8], len: usize) -> usize {
    if let Some(key) = sealing_key(config, &buf[..HEADER_LEN]) {
        Header::new_unchecked(&mut buf[..HEADER_LEN]).set_flag(Flags::MAC, true);
        let tag = key.tag(&buf[..len]);
        buf[len..len + MAC_LEN].copy_from_slice(&tag);
        return len + MAC_LEN;
    }
    if config.checksum {
        Header::new_unchecked(&mut buf[..HEADER_LEN]).set_flag(Flags::CHECKSUM, true);
        let crc = mw_wire::packet_checksum(&buf[..len]);
        buf[len..len + CHECKSUM_LEN].copy_from_slice(&crc.to_le_bytes());
        return len + CHECKSUM_LEN;
    }
    len
}

/// With checksums on, the first check of a received datagram: magic and
/// version (which say how the packet is laid out), then the CRC32C trailer
/// over everything before it, before any length, flag or address in the
/// header is believed. A corrupted packet fails here whichever byte was hit
/// (a hit on magic or version is reported as such). Without checksums a no-op.
pub(crate) fn check_checksum(config: &Config, datagram: &[u8]) -> Result<(), DropReason> {
    if !config.checksum {
        return Ok(());
    }
    mw_wire::check_preamble(datagram).map_err(DropReason::Malformed)?;
    if config.epoch_key.is_some() && Header::new_unchecked(datagram).flags_raw() & Flags::MAC.bits() != 0 {
        // An epoch proof carries the MAC instead, which [`verify`] checks
        // over every byte (a corruption that set this flag fails there).
        return Ok(());
    }
    if !mw_wire::checksum_matches(datagram) {
        return Err(DropReason::BadChecksum);
    }
    Ok(())
}

/// Seals a packet whose payload is not behind its header: the header
/// (`head_len` bytes) is in `buf`, the payload is `payload` (in order), and
/// the trailer is written at `buf[head_len..]` for the caller to send after
/// the payload. Returns the trailer length. The trailer (MAC or checksum) is
/// the same as [`seal`]'s over the concatenated packet.
pub(crate) fn seal_parts(config: &Config, buf: &mut [u8], head_len: usize, payload: [&[u8]; 2]) -> usize {
    if let Some(key) = sealing_key(config, &buf[..HEADER_LEN]) {
        Header::new_unchecked(&mut buf[..HEADER_LEN]).set_flag(Flags::MAC, true);
        let tag = key.tag_parts(&[&buf[..head_len], payload[0], payload[1]]);
        buf[head_len..head_len + MAC_LEN].copy_from_slice(&tag);
        return MAC_LEN;
    }
    if config.checksum {
        Header::new_unchecked(&mut buf[..HEADER_LEN]).set_flag(Flags::CHECKSUM, true);
        let crc = mw_wire::packet_checksum_parts(&[&buf[..head_len], payload[0], payload[1]]);
        buf[head_len..head_len + CHECKSUM_LEN].copy_from_slice(&crc.to_le_bytes());
        return CHECKSUM_LEN;
    }
    0
}

/// Accepts or rejects a received datagram whose header parsed as `repr`
/// (so its length matches what the header announces, trailer included):
/// its trailer must be the one `config` asks for, and a MAC must verify.
/// (A checksum was already verified by [`check_checksum`].) Returns whether
/// the packet carries a valid MAC: always with authentication; without, a
/// packet proving its sender's epoch under `Config::epoch_key`.
pub(crate) fn verify(config: &Config, datagram: &[u8], repr: &HeaderRepr) -> Result<bool, DropReason> {
    let has_mac = repr.flags.contains(Flags::MAC);
    if config.auth.is_none() && has_mac {
        // An epoch proof (or a rank that authenticates while we do not).
        let Some(key) = &config.epoch_key else {
            return Err(DropReason::BadMac);
        };
        return mac_matches(key, datagram, repr).then_some(true).ok_or(DropReason::BadMac);
    }
    if repr.flags.contains(Flags::CHECKSUM) != config.checksum {
        // Checksums on: the CRC matched bytes that do not announce one (a
        // 2^-32 chance per corrupted packet). Off: a rank that checksums
        // while we do not; ranks of one job must agree.
        return Err(DropReason::BadChecksum);
    }
    let Some(key) = &config.auth else {
        return Ok(false);
    };
    if has_mac && mac_matches(key, datagram, repr) {
        Ok(true)
    } else {
        Err(DropReason::BadMac)
    }
}

/// Whether `datagram` (parsed as `repr`) ends in a valid MAC under `key`.
fn mac_matches(key: &AuthKey, datagram: &[u8], repr: &HeaderRepr) -> bool {
    let end = HEADER_LEN + usize::from(repr.payload_len);
    let (Some(authenticated), Some(trailer)) = (datagram.get(..end), datagram.get(end..end + MAC_LEN)) else {
        return false;
    };
    let mut got = [0u8; MAC_LEN];
    got.copy_from_slice(trailer);
    constant_time_eq::constant_time_eq_16(&key.tag(authenticated), &got)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(payload: &[u8]) -> (Vec<u8>, usize) {
        let repr = HeaderRepr {
            packet_type: PacketType::Data,
            flags: Flags::FIRST | Flags::LAST,
            payload_len: payload.len() as u16,
            job_id: 7,
            src_rank: 0,
            dst_rank: 1,
            src_epoch: 3,
            dst_epoch: 4,
            seq: 9,
            ack: 0,
            sack: 0,
        };
        let mut buf = vec![0u8; HEADER_LEN + payload.len() + MAC_LEN];
        repr.emit_into(&mut buf);
        buf[HEADER_LEN..HEADER_LEN + payload.len()].copy_from_slice(payload);
        (buf, HEADER_LEN + payload.len())
    }

    fn config(key: Option<&AuthKey>, checksum: bool) -> Config {
        Config { auth: key.cloned(), checksum, ..Config::default() }
    }

    fn check(key: Option<&AuthKey>, datagram: &[u8]) -> Result<(), DropReason> {
        check_with(&config(key, false), datagram)
    }

    fn check_with(config: &Config, datagram: &[u8]) -> Result<(), DropReason> {
        check_checksum(config, datagram)?;
        let (repr, _) = HeaderRepr::parse_packet(datagram).map_err(DropReason::Malformed)?;
        verify(config, datagram, &repr).map(drop)
    }

    #[test]
    fn sealed_packets_verify_and_every_bit_flip_is_caught() {
        let key = AuthKey::from_job_key(&[5; 16]);
        let (mut buf, len) = packet(b"eight by");
        let len = seal(&config(Some(&key), false), &mut buf, len);
        assert_eq!(len, buf.len());
        assert_eq!(check(Some(&key), &buf), Ok(()));
        for bit in 0..buf.len() * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(check(Some(&key), &bad).is_err(), "flip of bit {bit} accepted");
        }
    }

    #[test]
    fn sealing_in_parts_gives_the_same_packet() {
        let key = AuthKey::from_job_key(&[5; 16]);
        let payload = b"a payload split in three places";
        for config in [config(Some(&key), false), config(None, true), config(None, false)] {
            let (mut whole, len) = packet(payload);
            let whole_len = seal(&config, &mut whole, len);
            for cut in 0..=payload.len() {
                let (mut head, _) = packet(payload);
                let parts: [&[u8]; 2] = [&payload[..cut], &payload[cut..]];
                let trailer = seal_parts(&config, &mut head, HEADER_LEN, parts);
                assert_eq!(trailer, trailer_len(&config));
                let mut joined = head[..HEADER_LEN].to_vec();
                joined.extend_from_slice(payload);
                joined.extend_from_slice(&head[HEADER_LEN..HEADER_LEN + trailer]);
                assert_eq!(joined, whole[..whole_len], "cut at {cut}");
                assert_eq!(check_with(&config, &joined), Ok(()), "cut at {cut}");
            }
        }
    }

    #[test]
    fn wrong_key_missing_or_unexpected_mac_is_rejected() {
        let key = AuthKey::from_job_key(&[5; 16]);
        let other = AuthKey::from_job_key(&[6; 16]);
        let (mut buf, len) = packet(b"x");
        let plain = buf[..len].to_vec();
        seal(&config(Some(&key), false), &mut buf, len);
        assert_eq!(check(Some(&other), &buf), Err(DropReason::BadMac));
        assert_eq!(check(None, &buf), Err(DropReason::BadMac), "a MAC we cannot check is not trusted");
        assert_eq!(check(Some(&key), &plain), Err(DropReason::BadMac), "missing MAC");
        assert_eq!(check(None, &plain), Ok(()));
    }

    /// The zero padding of the last block is not ambiguous (the length
    /// block tells them apart), a tag over pieces is the tag over their
    /// concatenation wherever the blocks are cut, and each subkey matters.
    #[test]
    fn tags_tell_padding_apart_and_do_not_depend_on_how_the_bytes_are_cut() {
        let key = AuthKey::from_bytes([4; 32]);
        let data: Vec<u8> = (0..100u8).collect();
        assert_ne!(key.tag(&data[..15]), key.tag(&[&data[..15], &[0u8][..]].concat()));
        assert_ne!(key.tag(&[]), key.tag(&[0u8; 16]));
        let whole = key.tag(&data);
        for a in 0..=data.len() {
            for b in a..=data.len() {
                assert_eq!(key.tag_parts(&[&data[..a], &data[a..b], &data[b..]]), whole, "cut at {a}, {b}");
            }
        }
        assert_ne!(AuthKey::from_bytes([5; 32]).tag(&data), whole);
        assert_eq!(AuthKey::from_bytes([4; 32]), key);
        assert_ne!(AuthKey::from_bytes([5; 32]), key);
    }

    #[test]
    fn key_derivations_are_separated_and_redacted() {
        let job_key = [9u8; 16];
        let key = AuthKey::from_job_key(&job_key);
        assert_ne!(&key.bytes[..8], &job_id_from_key(&job_key).to_le_bytes());
        assert_ne!(job_id_from_key(&job_key), job_id_from_key(&[8; 16]));
        assert_ne!(AuthKey::epoch_proof_from_job_key(&job_key), key, "a MAC must not pass as an epoch proof");
        assert_eq!(format!("{key:?}"), "AuthKey(<redacted>)");
        assert_eq!(seal(&Config::default(), &mut [0u8; 64], 48), 48);
    }

    #[test]
    fn checksummed_packets_verify_and_every_bit_flip_is_caught_first() {
        let crc = config(None, true);
        let (mut buf, len) = packet(b"eight by");
        let len = seal(&crc, &mut buf, len);
        assert_eq!(len, HEADER_LEN + 8 + CHECKSUM_LEN);
        let buf = &buf[..len];
        assert_eq!(check_with(&crc, buf), Ok(()));
        for bit in 0..buf.len() * 8 {
            let mut bad = buf.to_vec();
            bad[bit / 8] ^= 1 << (bit % 8);
            let want = match bit / 8 {
                0 | 1 => DropReason::Malformed(mw_wire::Error::BadMagic),
                2 => DropReason::Malformed(mw_wire::Error::BadVersion),
                _ => DropReason::BadChecksum,
            };
            assert_eq!(check_with(&crc, &bad), Err(want), "flip of bit {bit}");
        }
        // Truncated, stripped of its trailer, or checksummed where not expected.
        assert_eq!(check_with(&crc, &buf[..len - 1]), Err(DropReason::BadChecksum));
        let mut stripped = buf[..len - CHECKSUM_LEN].to_vec();
        stripped[4] &= !(Flags::CHECKSUM.bits() as u8);
        assert_eq!(check_with(&crc, &stripped), Err(DropReason::BadChecksum));
        assert_eq!(check_with(&config(None, false), &stripped), Ok(()));
        assert_eq!(check_with(&config(None, false), buf), Err(DropReason::BadChecksum));
        let key = AuthKey::from_job_key(&[5; 16]);
        assert_eq!(check_with(&config(Some(&key), false), buf), Err(DropReason::BadChecksum));
    }
}
