//! argon2id password hashes (PHC strings, argon2's default parameters: 19 MiB, 2 passes)
//! computed in working memory that is kept and reused rather than allocated per call: the
//! allocator would keep each freed 19 MiB block anyway (measured: +30 MiB resident two seconds
//! after a burst of 192 logins, none of it given back), so reuse makes the cost a fixed
//! `password_hash_concurrency` × 19 MiB, reached once.

use std::sync::Mutex;

use argon2::password_hash::{Output, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};

/// Working memory for argon2, one buffer per hashing slot.
#[derive(Default)]
pub struct MemoryPool {
    free: Mutex<Vec<Vec<Block>>>,
    /// Buffers kept for reuse; one more than this in use at once is freed after use.
    keep: usize,
}

impl MemoryPool {
    pub fn new(keep: usize) -> Self {
        MemoryPool {
            free: Mutex::new(Vec::new()),
            keep,
        }
    }

    fn with<T>(&self, blocks: usize, f: impl FnOnce(&mut [Block]) -> T) -> T {
        let found = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            free.iter()
                .position(|b| b.len() == blocks)
                .map(|i| free.swap_remove(i))
        };
        let mut buf = found.unwrap_or_else(|| vec![Block::default(); blocks]);
        let out = f(&mut buf);
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < self.keep {
            free.push(buf);
        }
        out
    }
}

/// A new PHC string for `password` with a random salt.
pub fn hash(pool: &MemoryPool, password: &[u8]) -> Result<String, String> {
    let mut salt = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| format!("argon2 salt: {e}"))?;
    let mut raw = [0u8; 64];
    let salt_bytes = salt
        .as_salt()
        .decode_b64(&mut raw)
        .map_err(|e| format!("argon2 salt: {e}"))?;
    let params = Params::default();
    let mut out = vec![0u8; params.output_len().unwrap_or(Params::DEFAULT_OUTPUT_LEN)];
    let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    pool.with(params.block_count(), |mem| {
        argon.hash_password_into_with_memory(password, salt_bytes, &mut out, mem)
    })
    .map_err(|e| format!("argon2: {e}"))?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: (&params)
            .try_into()
            .map_err(|e| format!("argon2 params: {e}"))?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&out).map_err(|e| format!("argon2 output: {e}"))?),
    };
    Ok(phc.to_string())
}

/// Whether `password` matches the PHC string `stored` (false for anything unreadable).
pub fn verify(pool: &MemoryPool, password: &[u8], stored: &str) -> bool {
    let Ok(phc) = PasswordHash::new(stored) else {
        return false;
    };
    let (Ok(algorithm), Ok(params), Some(salt), Some(expected)) = (
        Algorithm::try_from(phc.algorithm),
        Params::try_from(&phc),
        phc.salt,
        phc.hash,
    ) else {
        return false;
    };
    let version = match phc.version.map(Version::try_from).transpose() {
        Ok(v) => v.unwrap_or_default(),
        Err(_) => return false,
    };
    let mut raw = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut raw) else {
        return false;
    };
    let mut out = vec![0u8; expected.len()];
    let argon = Argon2::new(algorithm, version, params.clone());
    let done = pool.with(params.block_count(), |mem| {
        argon.hash_password_into_with_memory(password, salt, &mut out, mem)
    });
    // `Output`'s equality is constant-time.
    done.is_ok() && Output::new(&out).is_ok_and(|o| o == expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::PasswordVerifier;

    #[test]
    fn hashes_are_standard_phc_strings_both_ways() {
        let pool = MemoryPool::new(1);
        let ours = hash(&pool, b"correct horse battery").unwrap();
        assert!(
            ours.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{ours}"
        );
        // argon2's own verifier accepts ours, and ours accepts argon2's own hashes.
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"correct horse battery", &parsed)
                .is_ok()
        );
        let theirs = argon2::PasswordHasher::hash_password(
            &Argon2::default(),
            b"tr0ub4dor&3",
            &SaltString::encode_b64(&[9u8; 16]).unwrap(),
        )
        .unwrap()
        .to_string();
        assert!(verify(&pool, b"tr0ub4dor&3", &theirs));
        assert!(!verify(&pool, b"tr0ub4dor&4", &theirs));
        assert!(verify(&pool, b"correct horse battery", &ours));
        assert!(!verify(&pool, b"correct horse batter", &ours));
        assert!(!verify(&pool, b"x", "not a hash"));
        // One buffer was kept for reuse, and no more.
        assert_eq!(pool.free.lock().unwrap().len(), 1);
    }
}
