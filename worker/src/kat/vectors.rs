//! Known-answer vectors, each with its source.
//!
//! Published vectors (FIPS 180-4/202 examples, RFC 2202, RFC 4231, the GCM specification,
//! RFC 8439, RFC 8032, RFC 7748, RFC 6979, NIST CAVP) are copied from their documents. Where no
//! published vector fits our fixed keys (RSA PKCS#1 v1.5 and PSS, ECDSA with digests RFC 6979
//! does not pair with our keys, HMAC-SHA3-256), the expected value was computed once with an
//! independent implementation, pyca/cryptography 48.0 over OpenSSL 3.0, and is labelled so;
//! the RustCrypto backend, which shares no code with OpenSSL, must reproduce it in the tests.

use std::sync::OnceLock;

use crate::ops::{AeadAlg, DigestAlg, KemAlg, MlDsaLevel, RsaPadding};

/// Hex, as written in the source documents.
pub type Hex = &'static str;

/// The one-block message "abc" and its digest: FIPS 180-4 examples (NIST CSRC "Examples with
/// Intermediate Values", SHA1.pdf, SHA256.pdf, SHA384.pdf, SHA512.pdf) and FIPS 202
/// (SHA3-256_Msg0 ... "abc" example, SHA3-256.pdf).
pub fn digest_abc(alg: DigestAlg) -> (Hex, &'static str) {
    match alg {
        DigestAlg::Sha1 => ("a9993e364706816aba3e25717850c26c9cd0d89d", "FIPS 180-4 example \"abc\""),
        DigestAlg::Sha256 => (
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "FIPS 180-4 example \"abc\"",
        ),
        DigestAlg::Sha384 => (
            "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed\
             8086072ba1e7cc2358baeca134c825a7",
            "FIPS 180-4 example \"abc\"",
        ),
        DigestAlg::Sha512 => (
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
             2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            "FIPS 180-4 example \"abc\"",
        ),
        DigestAlg::Sha3_256 => (
            "3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532",
            "FIPS 202 example \"abc\"",
        ),
    }
}

/// One HMAC vector: key, data, expected tag.
pub struct HmacVector {
    pub key: &'static [u8],
    pub data: &'static [u8],
    pub tag: Hex,
}

/// HMAC vectors: test cases 1 (key 20 × 0x0b, "Hi There"), 2 (key "Jefe") and 6 (a key longer
/// than the block, 0xaa × 131; × 80 for SHA-1), which a token refusing short HMAC keys (SoftHSM2
/// takes none below the digest's length) can run. SHA-1: RFC 2202 §3; SHA-256/384/512: RFC 4231
/// §4.2, 4.3 and 4.7; SHA3-256: computed (see the source string).
pub fn hmac(alg: DigestAlg) -> ([HmacVector; 3], &'static str) {
    const K1: &[u8] = &[0x0b; 20];
    const D1: &[u8] = b"Hi There";
    const K2: &[u8] = b"Jefe";
    const D2: &[u8] = b"what do ya want for nothing?";
    const K6: &[u8] = &[0xaa; 131];
    const K6_SHA1: &[u8] = &[0xaa; 80];
    const D6: &[u8] = b"Test Using Larger Than Block-Size Key - Hash Key First";
    let (t1, t2, t6, source) = match alg {
        DigestAlg::Sha1 => (
            "b617318655057264e28bc0b6fb378c8ef146be00",
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79",
            "aa4ae5e15272d00e95705637ce8a3b55ed402112",
            "RFC 2202 test cases 1, 2 and 6",
        ),
        DigestAlg::Sha256 => (
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            "RFC 4231 test cases 1, 2 and 6",
        ),
        DigestAlg::Sha384 => (
            "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c\
             faea9ea9076ede7f4af152e8b2fa9cb6",
            "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e\
             8e2240ca5e69e2c78b3239ecfab21649",
            "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c6\
             0c2ef6ab4030fe8296248df163f44952",
            "RFC 4231 test cases 1, 2 and 6",
        ),
        DigestAlg::Sha512 => (
            "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde\
             daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554\
             9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
            "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352\
             6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598",
            "RFC 4231 test cases 1, 2 and 6",
        ),
        DigestAlg::Sha3_256 => (
            "ba85192310dffa96e2a3a40e69774351140bb7185e1202cdcc917589f95e16bb",
            "c7d4072e788877ae3596bbb0da73b887c9171f93095b294ae857fbe2645e1ba5",
            "ed73a374b96c005235f948032f09674a58c0ce555cfc1f223b02356560312c3b",
            "RFC 4231 inputs of test cases 1, 2 and 6, tags computed with pyca/cryptography 48.0 (1, 2) \
             and Python 3.11's hmac and hashlib (6)",
        ),
    };
    let k6 = if alg == DigestAlg::Sha1 { K6_SHA1 } else { K6 };
    (
        [
            HmacVector { key: K1, data: D1, tag: t1 },
            HmacVector { key: K2, data: D2, tag: t2 },
            HmacVector { key: k6, data: D6, tag: t6 },
        ],
        source,
    )
}

/// One XTS-AES vector: the key Key1 ‖ Key2, the data unit sequence number (the tweak, as a
/// 16-byte little-endian value), plaintext and ciphertext of one data unit.
pub struct XtsVector {
    pub key: Hex,
    pub sector: u64,
    pub plaintext: Hex,
    pub ciphertext: Hex,
}

/// The 512-byte plaintext of IEEE 1619 vectors 4 and 10: bytes 00..ff twice.
fn xts_pt512() -> String {
    (0..512).map(|i| format!("{:02x}", i % 256)).collect()
}

/// XTS-AES vectors, IEEE Std 1619-2007 Annex B (Key1 ‖ Key2 as one key; the data unit sequence
/// number as written there). XTS-AES-128: vectors 2 and 3 (32-byte data units) and 4 (512
/// bytes); vector 1 is left out, its two all-zero keys being equal (refused by
/// `backends::check_xts_key`, as by OpenSSL and AWS-LC). XTS-AES-256: vector 10 (512 bytes).
/// Copied from the standard's Annex B as other implementations' test suites reproduce it; each
/// vector is reproduced here by every backend that has the key size (OpenSSL, AWS-LC for
/// XTS-AES-256, RustCrypto's xts-mode: `backends::conformance`), three independent
/// implementations.
pub fn xts(bits: crate::ops::XtsBits) -> (Vec<XtsVector>, &'static str) {
    // The strings live for the process: the vectors are built once per key size.
    static PT512: OnceLock<String> = OnceLock::new();
    let pt512: &'static str = PT512.get_or_init(xts_pt512);
    match bits {
        crate::ops::XtsBits::Aes128 => (
            vec![
                XtsVector {
                    key: "1111111111111111111111111111111122222222222222222222222222222222",
                    sector: 0x33_3333_3333,
                    plaintext: "4444444444444444444444444444444444444444444444444444444444444444",
                    ciphertext: "c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0",
                },
                XtsVector {
                    key: "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f022222222222222222222222222222222",
                    sector: 0x33_3333_3333,
                    plaintext: "4444444444444444444444444444444444444444444444444444444444444444",
                    ciphertext: "af85336b597afc1a900b2eb21ec949d292df4c047e0b21532186a5971a227a89",
                },
                XtsVector {
                    key: "2718281828459045235360287471352631415926535897932384626433832795",
                    sector: 0,
                    plaintext: pt512,
                    ciphertext: "27a7479befa1d476489f308cd4cfa6e2a96e4bbe3208ff25287dd3819616e89c\
                                 c78cf7f5e543445f8333d8fa7f56000005279fa5d8b5e4ad40e736ddb4d35412\
                                 328063fd2aab53e5ea1e0a9f332500a5df9487d07a5c92cc512c8866c7e860ce\
                                 93fdf166a24912b422976146ae20ce846bb7dc9ba94a767aaef20c0d61ad0265\
                                 5ea92dc4c4e41a8952c651d33174be51a10c421110e6d81588ede82103a252d8\
                                 a750e8768defffed9122810aaeb99f9172af82b604dc4b8e51bcb08235a6f434\
                                 1332e4ca60482a4ba1a03b3e65008fc5da76b70bf1690db4eae29c5f1badd03c\
                                 5ccf2a55d705ddcd86d449511ceb7ec30bf12b1fa35b913f9f747a8afd1b130e\
                                 94bff94effd01a91735ca1726acd0b197c4e5b03393697e126826fb6bbde8ecc\
                                 1e08298516e2c9ed03ff3c1b7860f6de76d4cecd94c8119855ef5297ca67e9f3\
                                 e7ff72b1e99785ca0a7e7720c5b36dc6d72cac9574c8cbbc2f801e23e56fd344\
                                 b07f22154beba0f08ce8891e643ed995c94d9a69c9f1b5f499027a78572aeebd\
                                 74d20cc39881c213ee770b1010e4bea718846977ae119f7a023ab58cca0ad752\
                                 afe656bb3c17256a9f6e9bf19fdd5a38fc82bbe872c5539edb609ef4f79c203e\
                                 bb140f2e583cb2ad15b4aa5b655016a8449277dbd477ef2c8d6c017db738b18d\
                                 eb4a427d1923ce3ff262735779a418f20a282df920147beabe421ee5319d0568",
                },
            ],
            "IEEE Std 1619-2007 Annex B, XTS-AES-128 vectors 2, 3 and 4",
        ),
        crate::ops::XtsBits::Aes256 => (
            vec![XtsVector {
                key: "27182818284590452353602874713526624977572470936999595749669676273141592653589793238462643383279502884197169399375105820974944592",
                sector: 0xff,
                plaintext: pt512,
                ciphertext: "1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b\
                             5d31e276f8fe4a8d66b317f9ac683f44680a86ac35adfc3345befecb4bb188fd\
                             5776926c49a3095eb108fd1098baec70aaa66999a72a82f27d848b21d4a741b0\
                             c5cd4d5fff9dac89aeba122961d03a757123e9870f8acf1000020887891429ca\
                             2a3e7a7d7df7b10355165c8b9a6d0a7de8b062c4500dc4cd120c0f7418dae3d0\
                             b5781c34803fa75421c790dfe1de1834f280d7667b327f6c8cd7557e12ac3a0f\
                             93ec05c52e0493ef31a12d3d9260f79a289d6a379bc70c50841473d1a8cc81ec\
                             583e9645e07b8d9670655ba5bbcfecc6dc3966380ad8fecb17b6ba02469a020a\
                             84e18e8f84252070c13e9f1f289be54fbc481457778f616015e1327a02b140f1\
                             505eb309326d68378f8374595c849d84f4c333ec4423885143cb47bd71c5edae\
                             9be69a2ffeceb1bec9de244fbe15992b11b77c040f12bd8f6a975a44a0f90c29\
                             a9abc3d4d893927284c58754cce294529f8614dcd2aba991925fedc4ae74ffac\
                             6e333b93eb4aff0479da9a410e4450e0dd7ae4c6e2910900575da401fc07059f\
                             645e8b7e9bfdef33943054ff84011493c27b3429eaedb4ed5376441a77ed4385\
                             1ad77f16f541dfd269d50d6a5f14fb0aab1cbb4c1550be97f7ab4066193c4caa\
                             773dad38014bd2092fa755c824bb5e54c4f36ffda9fcea70b9c6e693e148c151",
            }],
            "IEEE Std 1619-2007 Annex B, XTS-AES-256 vector 10",
        ),
    }
}

/// One AEAD vector: `sealed` is ciphertext || tag.
pub struct AeadVector {
    pub key: Hex,
    pub nonce: Hex,
    pub aad: Hex,
    pub plaintext: Hex,
    pub sealed: Hex,
}

/// AEAD vectors. AES-GCM: McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)",
/// Appendix B, test cases 2 and 4 (AES-128) and 14 (AES-256). ChaCha20-Poly1305: RFC 8439
/// §2.8.2 (the "sunscreen" example).
pub fn aead(alg: AeadAlg) -> (Vec<AeadVector>, &'static str) {
    match alg {
        AeadAlg::Aes128Gcm => (
            vec![
                AeadVector {
                    key: "00000000000000000000000000000000",
                    nonce: "000000000000000000000000",
                    aad: "",
                    plaintext: "00000000000000000000000000000000",
                    sealed: "0388dace60b6a392f328c2b971b2fe78ab6e47d42cec13bdf53a67b21257bddf",
                },
                AeadVector {
                    key: "feffe9928665731c6d6a8f9467308308",
                    nonce: "cafebabefacedbaddecaf888",
                    aad: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
                    plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72\
                                1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
                    sealed: "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e\
                             21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091\
                             5bc94fbc3221a5db94fae95ae7121a47",
                },
            ],
            "GCM specification (McGrew & Viega) test cases 2 and 4",
        ),
        AeadAlg::Aes256Gcm => (
            vec![AeadVector {
                key: "0000000000000000000000000000000000000000000000000000000000000000",
                nonce: "000000000000000000000000",
                aad: "",
                plaintext: "00000000000000000000000000000000",
                sealed: "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919",
            }],
            "GCM specification (McGrew & Viega) test case 14",
        ),
        AeadAlg::ChaCha20Poly1305 => (
            vec![AeadVector {
                key: "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f",
                nonce: "070000004041424344454647",
                aad: "50515253c0c1c2c3c4c5c6c7",
                // "Ladies and Gentlemen of the class of '99: If I could offer you only one tip
                // for the future, sunscreen would be it."
                plaintext: "4c616469657320616e642047656e746c656d656e206f662074686520636c6173\
                            73206f66202739393a204966204920636f756c64206f6666657220796f75206f\
                            6e6c79206f6e652074697020666f7220746865206675747572652c2073756e73\
                            637265656e20776f756c642062652069742e",
                sealed: "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6\
                         3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36\
                         92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc\
                         3ff4def08e4b7a9de576d26586cec64b6116\
                         1ae10b594f09e26a7e902ecbd0600691",
            }],
            "RFC 8439 §2.8.2",
        ),
    }
}

/// RFC 8032 §7.1 TEST 1: the signature of the empty message under the fixed Ed25519 key
/// (`ops::keys`, which holds TEST 1's secret and public key).
pub const ED25519_TEST1_SIG: Hex = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155\
                                    5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";

/// RFC 7748 §6.1: the shared secret of Alice's private key and Bob's public key
/// (`ops::keys::X25519_ALICE`, `X25519_BOB`).
pub const X25519_SHARED: Hex = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742";

/// RFC 3526 §3, the 2048-bit MODP group (group 14): its prime p, big-endian; the generator is 2.
/// Every backend's FFDH-2048 runs on this group (OpenSSL and AWS-LC build it from their own
/// `BN_get_rfc3526_prime_2048`; the conformance suite checks the two equal this constant through
/// the public keys they accept and refuse).
pub const MODP2048_P: Hex = "ffffffffffffffffc90fdaa22168c234c4c6628b80dc1cd129024e088a67cc74\
                             020bbea63b139b22514a08798e3404ddef9519b3cd3a431b302b0a6df25f1437\
                             4fe1356d6d51c245e485b576625e7ec6f44c42e9a637ed6b0bff5cb6f406b7ed\
                             ee386bfb5a899fa5ae9f24117c4b1fe649286651ece45b3dc2007cb8a163bf05\
                             98da48361c55d39a69163fa8fd24cf5f83655d23dca3ad961c62f356208552bb\
                             9ed529077096966d670c354e4abc9804f1746c08ca18217c32905e462e36ce3b\
                             e39e772c180e86039b2783a2ec07a28fb5c55df06f4c52c9de2bcbf695581718\
                             3995497cea956ae515d2261898fa051015728e5a8aacaa68ffffffffffffffff";

/// NIST CAVP, ECC CDH Primitive (SP 800-56A) test vectors, `KAS_ECC_CDH_PrimitiveTest.txt`,
/// curve P-256, COUNT = 0: the IUT's private key (also as PKCS#8 DER in `vectors/`, made from
/// `D_IUT` with pyca/cryptography), its public key, the CAVS public key and the shared Z.
pub mod cavp_ecdh_p256 {
    pub const D_IUT_PKCS8: &[u8] = include_bytes!("vectors/cavp-ecdh-p256-count0.pk8.der");
    pub const D_IUT: super::Hex = "7d7dc5f71eb29ddaf80d6214632eeae03d9058af1fb6d22ed80badb62bc1a534";
    /// SEC1 uncompressed `04 || QIUTx || QIUTy`.
    pub const Q_IUT: super::Hex = "04ead218590119e8876b29146ff89ca61770c4edbbf97d38ce385ed281d8a6b230\
                                   28af61281fd35e2fa7002523acc85a429cb06ee6648325389f59edfce1405141";
    /// SEC1 uncompressed `04 || QCAVSx || QCAVSy`.
    pub const Q_CAVS: super::Hex = "04700c48f77f56584c5cc632ca65640db91b6bacce3a4df6b42ce7cc838833d287\
                                    db71e509e3fd9b060ddb20ba5c51dcc5948d46fbf640dfe0441782cab85fa4ac";
    pub const Z: super::Hex = "46fc62106420ff012e54a434fbdd2d25ccc5852060561e68040dd7778997bd7b";
}

/// One ECDSA verification vector from RFC 6979: public key (SEC1 uncompressed), message,
/// DER signature.
pub struct EcdsaVector {
    pub public: Hex,
    pub msg: &'static [u8],
    pub sig_der: Hex,
}

/// RFC 6979 Appendix A.2.5 (P-256, SHA-256, message "sample") and A.2.6 (P-384, SHA-384,
/// "sample"): public key U and the signature (r, s), here DER-encoded as `Ecdsa-Sig-Value`.
pub fn rfc6979(curve_bits: u32, digest: DigestAlg) -> Option<EcdsaVector> {
    match (curve_bits, digest) {
        (256, DigestAlg::Sha256) => Some(EcdsaVector {
            public: "0460fed4ba255a9d31c961eb74c6356d68c049b8923b61fa6ce669622e60f29fb6\
                     7903fe1008b8bc99a41ae9e95628bc64f2f1b20c2d7e9f5177a3c294d4462299",
            msg: b"sample",
            sig_der: "3046022100efd48b2aacb6a8fd1140dd9cd45e81d69d2c877b56aaf991c34d0ea84eaf3716\
                      022100f7cb1c942d657c41d436c7a1b6e29f65f3e900dbb9aff4064dc4ab2f843acda8",
        }),
        (384, DigestAlg::Sha384) => Some(EcdsaVector {
            public: "04ec3a4e415b4e19a4568618029f427fa5da9a8bc4ae92e02e06aae5286b300c64\
                     def8f0ea9055866064a254515480bc138015d9b72d7d57244ea8ef9ac0c6218967\
                     08a59367f9dfb9f54ca84b3f1c9db1288b231c3ae0d4fe7344fd2533264720",
            msg: b"sample",
            sig_der: "306602310094edbb92a5ecb8aad4736e56c691916b3f88140666ce9fa73d64c4ea95ad133c\
                      81a648152e44acf96e36dd1e80fabe4602310099ef4aeb15f178cea1fe40db2603138f13\
                      0e740a19624526203b6351d0a3a94fa329c145786e679e7b82c71a38628ac8",
        }),
        _ => None,
    }
}

/// Signatures of the message "abc" under the fixed keys of `ops::keys`, computed once with
/// pyca/cryptography 48.0 (OpenSSL 3.0) — see the module doc and `vectors/computed-abc.txt`.
/// PKCS#1 v1.5 is deterministic, so a signer must reproduce these byte for byte; PSS and ECDSA
/// are randomised, so they serve verifiers only. PSS: MGF1 with the same digest, salt length =
/// digest length. ECDSA: DER `Ecdsa-Sig-Value`.
const COMPUTED_ABC: &str = include_str!("vectors/computed-abc.txt");

/// The computed signature of "abc" for `key` (`rsa2048`, `ecdsa-p256`, ...), `padding`
/// (`pkcs1`, `pss`, or `-` for ECDSA) and `digest`; `None` when the table has no such row.
pub fn computed_abc(key: &str, padding: &str, digest: DigestAlg) -> Option<Vec<u8>> {
    COMPUTED_ABC
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?, f.next()?, f.next()?, f.next()?))
        })
        .find(|&(k, p, d, _)| k == key && p == padding && d == digest.name())
        .map(|(.., sig)| hex::decode(sig).expect("computed-abc.txt holds hex"))
}

/// The row of [`computed_abc`] for an RSA key.
pub fn rsa_abc(bits: u32, digest: DigestAlg, padding: RsaPadding) -> Option<Vec<u8>> {
    let pad = match padding {
        RsaPadding::Pkcs1 => "pkcs1",
        RsaPadding::Pss => "pss",
    };
    computed_abc(&format!("rsa{bits}"), pad, digest)
}

/// The row of [`computed_abc`] for an ECDSA key (`curve_bits` 256 or 384).
pub fn ecdsa_abc(curve_bits: u32, digest: DigestAlg) -> Option<Vec<u8>> {
    computed_abc(&format!("ecdsa-p{curve_bits}"), "-", digest)
}

/// The source line reported for the computed signature vectors.
pub const COMPUTED_SIG_SOURCE: &str =
    "signature of \"abc\" under the fixed key, computed with pyca/cryptography 48.0 (OpenSSL 3.0)";

// ---- post-quantum vectors ------------------------------------------------------------------

/// The value of field `name` in a vector file of `vectors/` (`name = hex`, continued on the
/// following lines that hold no `=`; `#` starts a comment line). Panics when the field is
/// missing or not hex: the files are part of the build and a test reads every field.
pub fn field(text: &str, name: &str) -> Vec<u8> {
    let mut hex = String::new();
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            if inside {
                break;
            }
            continue;
        }
        match line.split_once('=') {
            Some((key, value)) => {
                if inside {
                    break;
                }
                if key.trim() == name {
                    inside = true;
                    hex.push_str(value.trim());
                }
            }
            None if inside => hex.push_str(line),
            None => {}
        }
    }
    assert!(inside, "vector field {name} is missing");
    hex::decode(&hex).unwrap_or_else(|e| panic!("vector field {name} is not hex: {e}"))
}

/// One ML-KEM parameter set's vectors (`vectors/ml-kem-*.txt`, whose comments cite the ACVP
/// test cases and say which values were computed and how).
pub struct MlKemVectors {
    /// Seeds of ML-KEM.KeyGen_internal(d, z).
    pub keygen_d: [u8; 32],
    pub keygen_z: [u8; 32],
    /// SHA-256 of the ek and dk that key generation must produce.
    pub keygen_ek_sha256: Vec<u8>,
    pub keygen_dk_sha256: Vec<u8>,
    /// Encapsulation/decapsulation test case: dk (ek is inside it), m, c, k, and the
    /// implicit-rejection key for c with its first byte XOR 0x01.
    pub dk: Vec<u8>,
    pub m: [u8; 32],
    pub c: Vec<u8>,
    pub k: Vec<u8>,
    pub k_rejected: Vec<u8>,
    pub source: &'static str,
}

impl MlKemVectors {
    /// The encapsulation key inside `dk` (FIPS 203: dk = dkPKE (384k bytes) || ek || H(ek) || z).
    pub fn ek(&self, rank: usize) -> &[u8] {
        &self.dk[384 * rank..768 * rank + 32]
    }
}

fn array32(v: Vec<u8>) -> [u8; 32] {
    v.try_into().expect("a 32-byte vector field")
}

/// The vectors of an ML-KEM parameter set (the hybrid uses ML-KEM-768's).
pub fn ml_kem(alg: KemAlg) -> &'static MlKemVectors {
    static CELLS: [OnceLock<MlKemVectors>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let (i, text, source) = match alg {
        KemAlg::MlKem512 => (
            0,
            include_str!("vectors/ml-kem-512.txt"),
            "ACVP-Server ML-KEM-encapDecap-FIPS203 tgId 1 tcId 1; key generation: ML-KEM-keyGen-FIPS203 \
             tgId 1 tcId 1 seeds, keys computed with kyber-py (vectors/ml-kem-512.txt)",
        ),
        KemAlg::MlKem768 | KemAlg::X25519MlKem768 => (
            1,
            include_str!("vectors/ml-kem-768.txt"),
            "ACVP-Server ML-KEM-encapDecap-FIPS203 tgId 2 tcId 26; key generation: ML-KEM-keyGen-FIPS203 \
             tgId 2 tcId 26 seeds, keys computed with kyber-py (vectors/ml-kem-768.txt)",
        ),
        KemAlg::MlKem1024 => (
            2,
            include_str!("vectors/ml-kem-1024.txt"),
            "ACVP-Server ML-KEM-encapDecap-FIPS203 tgId 3 tcId 51; key generation: ML-KEM-keyGen-FIPS203 \
             tgId 3 tcId 51 seeds, keys computed with kyber-py (vectors/ml-kem-1024.txt)",
        ),
    };
    CELLS[i].get_or_init(|| MlKemVectors {
        keygen_d: array32(field(text, "keygen_d")),
        keygen_z: array32(field(text, "keygen_z")),
        keygen_ek_sha256: field(text, "keygen_ek_sha256"),
        keygen_dk_sha256: field(text, "keygen_dk_sha256"),
        dk: field(text, "dk"),
        m: array32(field(text, "m")),
        c: field(text, "c"),
        k: field(text, "k"),
        k_rejected: field(text, "k_rejected"),
        source,
    })
}

/// One ML-DSA parameter set's vectors (`vectors/ml-dsa-*.txt`): the ACVP key-generation test
/// case (seed, public key) that is also the fixed ML-DSA key of `ops::keys`, and the
/// deterministic signature of "abc" under it.
pub struct MlDsaVectors {
    pub seed: Vec<u8>,
    pub pk: Vec<u8>,
    /// Checked by the RustCrypto backend's tests (the backends export no ML-DSA private key).
    #[cfg_attr(not(test), allow(dead_code))]
    pub sk_sha256: Vec<u8>,
    pub sig_abc: Vec<u8>,
    /// Where the key comes from.
    pub keygen_source: &'static str,
}

/// Source line of the ML-DSA verification vector.
pub const ML_DSA_SIG_SOURCE: &str =
    "deterministic ML-DSA signature of \"abc\" (empty context) under the ACVP keyGen key, computed \
     with dilithium-py 1.5.1 and reproduced by RustCrypto's ml-dsa";

pub fn ml_dsa(level: MlDsaLevel) -> &'static MlDsaVectors {
    static CELLS: [OnceLock<MlDsaVectors>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let (i, text, keygen_source) = match level {
        MlDsaLevel::MlDsa44 => (
            0,
            include_str!("vectors/ml-dsa-44.txt"),
            "ACVP-Server ML-DSA-keyGen-FIPS204 tgId 1 tcId 1",
        ),
        MlDsaLevel::MlDsa65 => (
            1,
            include_str!("vectors/ml-dsa-65.txt"),
            "ACVP-Server ML-DSA-keyGen-FIPS204 tgId 2 tcId 26",
        ),
        MlDsaLevel::MlDsa87 => (
            2,
            include_str!("vectors/ml-dsa-87.txt"),
            "ACVP-Server ML-DSA-keyGen-FIPS204 tgId 3 tcId 51",
        ),
    };
    CELLS[i].get_or_init(|| MlDsaVectors {
        seed: field(text, "seed"),
        pk: field(text, "pk"),
        sk_sha256: field(text, "sk_sha256"),
        sig_abc: field(text, "sig_abc"),
        keygen_source,
    })
}
