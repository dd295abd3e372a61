//! The once-per-decode-step call: fill the masks of a whole batch into one buffer.

use crate::error::FsmError;
use crate::fsm::TokenFsm;
use crate::StateId;

/// Fills row `i` of the row-major `out` (`row_words` int32 words per row) with the mask of
/// `requests[i]`. Every FSM must share one vocabulary size and `row_words` must cover it;
/// all inputs are checked before any row is written.
pub fn fill_bitmasks(
    requests: &[(&TokenFsm, StateId)],
    out: &mut [i32],
    row_words: usize,
) -> Result<(), FsmError> {
    let Some((first, _)) = requests.first() else {
        return Ok(());
    };
    let vocab_size = first.vocabulary().vocab_size();
    let needed = first.vocabulary().num_mask_words();
    if row_words < needed {
        return Err(FsmError::BitmaskTooSmall {
            needed,
            got: row_words,
        });
    }
    if out.len() < requests.len() * row_words {
        return Err(FsmError::BitmaskTooSmall {
            needed: requests.len() * row_words,
            got: out.len(),
        });
    }
    for &(fsm, state) in requests {
        if fsm.vocabulary().vocab_size() != vocab_size {
            return Err(FsmError::VocabularyMismatch {
                expected: vocab_size,
                got: fsm.vocabulary().vocab_size(),
            });
        }
        if state as usize >= fsm.num_states() {
            return Err(FsmError::UnknownState {
                state,
                num_states: fsm.num_states() as u32,
            });
        }
    }
    for (&(fsm, state), row) in requests.iter().zip(out.chunks_exact_mut(row_words)) {
        fsm.fill_bitmask(state, row)?;
    }
    Ok(())
}
