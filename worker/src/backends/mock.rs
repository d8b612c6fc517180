//! The scripted `mock` backend, for tests of the measurement loop and the orchestrator: no
//! crypto, only busy-waits of known length, so a test knows the true ratio between two cases.
//!
//! Names: `mock` (every operation waits `size_bytes` ns, unsized ones 1000 ns), `mock:SCALE`
//! (times SCALE), `mock:crash` (aborts the process at the first operation), `mock:hang` (never
//! returns from the first operation). Outputs are fixed bytes; validation is "not applicable".
//! Its AEAD and XTS leave the data as it is (no encryption): a layer built on them writes
//! plaintext to disk, which the `storage` workload's on-disk check must catch.

use super::{
    split_tag, Aead, Agreement, Backend, Digest, KemDecapsulator, KemEncapsulator, LibraryInfo,
    Mac, Result, SectorCipher, Signer, Verifier, XtsBits,
};
use crate::measure::clock;
use crate::ops::keys::KeyPair;
use crate::ops::{AeadAlg, DigestAlg, KemAlg, KxAlg, SigAlg};

/// Wait time of an operation without a message, in ns before scaling.
const UNSIZED_NS: u64 = 1000;

/// What the mock does when an operation runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Script {
    /// Busy-wait `bytes × scale` ns.
    Wait { scale: f64 },
    Crash,
    Hang,
}

/// The scripted backend (tests only; not listed in `hello`).
#[derive(Clone, Copy, Debug)]
pub struct Mock(pub Script);

impl Mock {
    /// Parse `mock`, `mock:SCALE`, `mock:crash`, `mock:hang`; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Mock> {
        let script = match name.strip_prefix("mock")? {
            "" => Script::Wait { scale: 1.0 },
            ":crash" => Script::Crash,
            ":hang" => Script::Hang,
            rest => {
                let scale: f64 = rest.strip_prefix(':')?.parse().ok()?;
                if !(scale.is_finite() && scale > 0.0) {
                    return None;
                }
                Script::Wait { scale }
            }
        };
        Some(Mock(script))
    }

    /// Run the script for an operation over `bytes` bytes (0: unsized).
    fn act(&self, bytes: usize) {
        match self.0 {
            Script::Wait { scale } => {
                let base = if bytes == 0 { UNSIZED_NS } else { bytes as u64 };
                let end = clock::monotonic_ns() + (base as f64 * scale) as u64;
                while clock::monotonic_ns() < end {}
            }
            Script::Crash => {
                eprintln!("mock:crash: aborting as scripted");
                std::process::abort();
            }
            Script::Hang => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
        }
    }

    fn boxed(&self) -> Box<Mock> {
        Box::new(*self)
    }
}

impl Backend for Mock {
    fn info(&self) -> LibraryInfo {
        LibraryInfo {
            backend: "mock",
            library: "mock".into(),
            library_version: env!("CARGO_PKG_VERSION").into(),
            fips: false,
            fips_provider: None,
        }
    }
    fn digest(&self, _: DigestAlg) -> Result<Box<dyn Digest>> {
        Ok(self.boxed())
    }
    fn hmac(&self, _: DigestAlg, _: &[u8]) -> Result<Box<dyn Mac>> {
        Ok(self.boxed())
    }
    fn aead(&self, _: AeadAlg, _: &[u8]) -> Result<Box<dyn Aead>> {
        Ok(self.boxed())
    }
    fn xts(&self, _: XtsBits, _: &[u8]) -> Result<Box<dyn SectorCipher>> {
        Ok(self.boxed())
    }
    fn signer(&self, _: SigAlg, _: &KeyPair) -> Result<Box<dyn Signer>> {
        Ok(self.boxed())
    }
    fn verifier(&self, _: SigAlg, _: &[u8]) -> Result<Box<dyn Verifier>> {
        Ok(self.boxed())
    }
    fn agreement(&self, _: KxAlg, _: Option<&KeyPair>) -> Result<Box<dyn Agreement>> {
        Ok(self.boxed())
    }
    fn kem_keypair(&self, _: KemAlg) -> Result<Box<dyn KemDecapsulator>> {
        Ok(self.boxed())
    }
    fn kem_encapsulator(&self, _: KemAlg, _: &[u8]) -> Result<Box<dyn KemEncapsulator>> {
        Ok(self.boxed())
    }
    fn sig_keygen(&self, _: SigAlg, _: Option<&[u8]>) -> Result<super::GeneratedSigner> {
        Ok(super::GeneratedSigner { signer: self.boxed(), public: vec![0; 32] })
    }
    fn owned(&self) -> Option<Box<dyn Backend>> {
        Some(Box::new(*self))
    }
}

impl Digest for Mock {
    fn digest(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        self.act(data.len());
        out.clear();
        out.resize(32, 0);
        Ok(())
    }
}
impl Mac for Mock {
    fn mac(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        Digest::digest(self, data, out)
    }
}
impl Aead for Mock {
    fn seal(&mut self, _: &[u8; 12], _: &[u8], pt: &[u8], out: &mut Vec<u8>) -> Result<()> {
        self.act(pt.len());
        out.clear();
        out.extend_from_slice(pt);
        out.extend_from_slice(&[0; 16]);
        Ok(())
    }
    fn open(&mut self, _: &[u8; 12], _: &[u8], sealed: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let (pt, _) = split_tag(sealed)?;
        self.act(pt.len());
        out.clear();
        out.extend_from_slice(pt);
        Ok(())
    }
}
impl SectorCipher for Mock {
    fn encrypt_sector(&mut self, _: u64, buf: &mut [u8]) -> Result<()> {
        self.act(buf.len());
        Ok(())
    }
    fn decrypt_sector(&mut self, _: u64, buf: &mut [u8]) -> Result<()> {
        self.act(buf.len());
        Ok(())
    }
}
impl Signer for Mock {
    fn sign(&mut self, msg: &[u8]) -> Result<Vec<u8>> {
        self.act(msg.len());
        Ok(vec![0; 64])
    }
}
impl Verifier for Mock {
    fn verify(&mut self, msg: &[u8], _: &[u8]) -> Result<bool> {
        self.act(msg.len());
        Ok(true)
    }
}
impl Agreement for Mock {
    fn public_key(&self) -> Vec<u8> {
        vec![0; 32]
    }
    fn derive(&mut self, _: &[u8]) -> Result<Vec<u8>> {
        self.act(0);
        Ok(vec![0; 32])
    }
}
impl KemDecapsulator for Mock {
    fn encapsulation_key(&self) -> Vec<u8> {
        vec![0; 32]
    }
    fn decaps(&mut self, _: &[u8]) -> Result<Vec<u8>> {
        self.act(0);
        Ok(vec![0; 32])
    }
}
impl KemEncapsulator for Mock {
    fn encaps(&mut self) -> Result<(Vec<u8>, Vec<u8>)> {
        self.act(0);
        Ok((vec![0; 32], vec![0; 32]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        assert_eq!(Mock::from_name("mock").unwrap().0, Script::Wait { scale: 1.0 });
        assert_eq!(Mock::from_name("mock:2.5").unwrap().0, Script::Wait { scale: 2.5 });
        assert_eq!(Mock::from_name("mock:crash").unwrap().0, Script::Crash);
        assert_eq!(Mock::from_name("mock:hang").unwrap().0, Script::Hang);
        for bad in ["mock:", "mock:-1", "mock:0", "mock:nan", "mockx", "openssl"] {
            assert!(Mock::from_name(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn waits_scale_with_size() {
        let mut d = Mock::from_name("mock:2").unwrap();
        let mut out = Vec::new();
        let start = clock::monotonic_ns();
        Digest::digest(&mut d, &[0; 50_000], &mut out).unwrap();
        assert!(clock::monotonic_ns() - start >= 100_000);
    }
}
