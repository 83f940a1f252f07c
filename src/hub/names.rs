//! What a repository id and every value a hub server sends must look like before it becomes
//! part of a path in the cache. A server is not trusted: a listed file name of `/etc/x` or
//! `../../x`, or a commit of `../..`, must never name a place outside the cache.

/// Checks one side of `owner/name` by Hugging Face's own rule (huggingface_hub's
/// `utils/_validators.py`, `validate_repo_id`): 1 to 96 of `[A-Za-z0-9_.-]`, starting and
/// ending with a letter, digit or `_` (its regex's word boundaries), and neither `--` nor `..`
/// anywhere. That rule alone keeps `.`, `..` and `owner/..` out.
pub fn is_repo_part(part: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    (1..=96).contains(&part.len())
        && part.chars().all(|c| word(c) || c == '-' || c == '.')
        && part.starts_with(word)
        && part.ends_with(word)
        && !part.contains("--")
        && !part.contains("..")
}

/// `owner/name`, each side an [`is_repo_part`].
pub fn is_repo_id(repo: &str) -> bool {
    repo.split_once('/').is_some_and(|(owner, name)| is_repo_part(owner) && is_repo_part(name))
}

/// A file name as listed in a repository: a relative path whose components are plain names
/// (no empty, `.` or `..` component, no leading `/`, no backslash, drive colon or NUL).
pub fn is_repo_file_path(path: &str) -> bool {
    !path.is_empty()
        && path.len() <= 1024
        && !path.contains(['\\', ':', '\0'])
        && path.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && c.len() <= 255)
}

/// A git commit id: 40 lowercase hex digits.
pub fn is_commit(id: &str) -> bool {
    is_hex(id, 40)
}

/// A sha256 digest: 64 lowercase hex digits (what the hub lists as an LFS file's `oid`).
pub fn is_sha256(id: &str) -> bool {
    is_hex(id, 64)
}

fn is_hex(id: &str, len: usize) -> bool {
    id.len() == len && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_follow_the_hubs_rule() {
        for good in ["GSAI-ML/LLaDA-8B-Instruct", "a/b", "mradermacher/LLaDA-8B-Instruct-GGUF", "x_1/y.z"] {
            assert!(is_repo_id(good), "{good}");
        }
        for bad in
            ["../..", "owner/..", "../name", "./x", "a/.", "a/b/c", "a", "a/-b", "a/b-", "a/b--c", "a/b..c", "/b", "a/"]
        {
            assert!(!is_repo_id(bad), "{bad}");
        }
        assert!(!is_repo_id(&format!("a/{}", "x".repeat(97))));
    }

    #[test]
    fn listed_names_stay_relative() {
        for good in ["model-Q4_K_M.gguf", "Q4_K_M/part-1.gguf", "a.b.gguf"] {
            assert!(is_repo_file_path(good), "{good}");
        }
        for bad in
            ["", "/etc/passwd", "../x.gguf", "a/../../x.gguf", "a//b.gguf", "./a.gguf", "a\\..\\b", "C:x.gguf", "a\0b"]
        {
            assert!(!is_repo_file_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn ids_are_exact_hex() {
        assert!(is_commit("0123456789abcdef0123456789abcdef01234567"));
        assert!(!is_commit("../../../../0123456789abcdef0123456789abcd"));
        assert!(!is_commit("0123456789ABCDEF0123456789ABCDEF01234567"));
        assert!(is_sha256(&"a".repeat(64)));
        assert!(!is_sha256(&"a".repeat(63)));
    }
}
