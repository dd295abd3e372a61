//! The once-per-decode-step call: fill the masks of a whole batch into one buffer.

use crate::error::FsmError;
use crate::fsm::TokenFsm;
use crate::StateId;

/// Fills row `i` of the row-major `out` (`row_words` int32 words per row) with the mask of
/// `requests[i]`. See [`fill_bitmask_rows`].
pub fn fill_bitmasks(
    requests: &[(&TokenFsm, StateId)],
    out: &mut [i32],
    row_words: usize,
) -> Result<(), FsmError> {
    let with_rows: Vec<(&TokenFsm, StateId, usize)> =
        requests.iter().enumerate().map(|(row, &(fsm, state))| (fsm, state, row)).collect();
    fill_bitmask_rows(&with_rows, out, row_words)
}

/// Fills row `row` of the row-major `out` (`row_words` int32 words per row) with the mask of
/// `fsm` in `state`, for every `(fsm, state, row)`. Every FSM must share one vocabulary size
/// and `row_words` must cover it; all inputs are checked before any row is written, so an
/// error leaves `out` untouched.
pub fn fill_bitmask_rows(
    requests: &[(&TokenFsm, StateId, usize)],
    out: &mut [i32],
    row_words: usize,
) -> Result<(), FsmError> {
    let Some(&(first, _, _)) = requests.first() else {
        return Ok(());
    };
    let vocab_size = first.vocabulary().vocab_size();
    let needed = first.vocabulary().num_mask_words();
    if row_words < needed {
        return Err(FsmError::BitmaskTooSmall { needed, got: row_words });
    }
    for &(fsm, state, row) in requests {
        if fsm.vocabulary().vocab_size() != vocab_size {
            return Err(FsmError::VocabularyMismatch {
                expected: vocab_size,
                got: fsm.vocabulary().vocab_size(),
            });
        }
        if state as usize >= fsm.num_states() {
            return Err(FsmError::UnknownState { state, num_states: fsm.num_states() as u32 });
        }
        let end = (row + 1).saturating_mul(row_words);
        if end > out.len() {
            return Err(FsmError::BitmaskTooSmall { needed: end, got: out.len() });
        }
    }
    for &(fsm, state, row) in requests {
        fsm.fill_bitmask(state, &mut out[row * row_words..(row + 1) * row_words])?;
    }
    Ok(())
}
