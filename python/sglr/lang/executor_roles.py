"""Roles, images, chat speculation and forking for `StreamExecutor` (split out to keep files small).

Role turns build two views of the same prompt: `text_` (the chat template applied) and
`messages_` (OpenAI-style, for chat APIs). Everything here runs on the executor's worker
thread, except `fork_children`, which the user thread calls after `sync()`.
"""

from __future__ import annotations

from typing import Any

from sglr.errors import ProgramError
from sglr.lang.image_encoding import encode_image_base64
from sglr.lang.speculative import GenPart, TextPart, chat_call_params, match_chat_template
from sglr.lang.video_encoding import encode_video_frames_base64

# Calls per assistant turn before chat speculation gives up on a reply that ignores the template.
NUM_CHAT_SPEC_TRIES = 3


class RoleMixin:
    # Attributes provided by StreamExecutor.
    text_: str
    messages_: list[dict]
    cur_role: str | None
    cur_role_begin_pos: int | None

    def _role_begin(self, role: str) -> None:
        if self.cur_role is not None:
            raise ValueError(f"Nested roles are not allowed: {role!r} begins inside {self.cur_role!r}.")
        template = self.chat_template
        if not self.messages_ and role != "system" and template.default_system_prompt is not None:
            prefix, suffix = template.get_prefix_and_suffix("system", [])
            self._fill(prefix + template.default_system_prompt + suffix, prefix=True)
            self.messages_.append({"role": "system", "content": template.default_system_prompt})
        prefix, _ = template.get_prefix_and_suffix(role, self.messages_)
        self._fill(prefix, prefix=True)
        self.cur_role = role
        self.cur_role_begin_pos = len(self.text_)

    def _role_end(self, role: str) -> None:
        if self.cur_role != role:
            raise ValueError(f"role {role!r} ends, but the open role is {self.cur_role!r}")
        if self._spec_parts:
            self._finish_speculative_turn()
        assert self.cur_role_begin_pos is not None
        content = self.text_[self.cur_role_begin_pos :].lstrip()
        _, suffix = self.chat_template.get_prefix_and_suffix(role, self.messages_)
        self.cur_role, self.cur_role_begin_pos = None, None
        self._fill(suffix, prefix=True)
        if self.cur_images:
            self.messages_.append({"role": role, "content": self._content_parts(content)})
            self.cur_images = []
        else:
            self.messages_.append({"role": role, "content": content})

    def _content_parts(self, content: str) -> list[dict]:
        """A turn's text and images as chat content parts, each image where its token stood (the
        token itself left out: the part carries the image, and a server's template renders its
        own token for it). Text holding other copies of the token keeps it, images at the end."""
        images = [
            {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64}"}}
            for _, b64 in self.cur_images
        ]
        pieces = content.split(self.chat_template.image_token)
        if len(pieces) != len(images) + 1:
            return [{"type": "text", "text": content}, *images]
        parts: list[dict] = []
        for piece, image in zip(pieces, [*images, None], strict=True):
            if piece:
                parts.append({"type": "text", "text": piece})
            if image is not None:
                parts.append(image)
        return parts

    def _add_image(self, source: Any) -> None:
        b64 = encode_image_base64(source)
        shown = source if isinstance(source, str) else type(source).__name__
        self.images_.append((shown, b64))
        self.cur_images.append((shown, b64))
        self._fill(self.chat_template.image_token, prefix=True)
        self.backend.fill_image(self)

    def _add_video(self, source: Any, num_frames: int) -> None:
        frames = encode_video_frames_base64(source, num_frames)
        shown = source if isinstance(source, str) else type(source).__name__
        self.videos_.append((shown, frames))
        self._fill(self.chat_template.video_token, prefix=True)

    def _finish_speculative_turn(self) -> None:
        """Generates a whole assistant turn in one call and splits it into the turn's gens."""
        parts, self._spec_parts = self._spec_parts, []
        if not any(isinstance(part, GenPart) for part in parts):
            for part in parts:
                self._append_text(part.text)
            return
        params = chat_call_params(parts, self.num_api_spec_tokens, self.chat_template.stop_str)
        replies = []
        for _ in range(NUM_CHAT_SPEC_TRIES):
            reply, meta = self.backend.generate(self, params)
            reply = reply[0] if isinstance(reply, list) else reply
            values = match_chat_template(parts, reply)
            if values is not None:
                break
            replies.append(reply)
        else:
            raise ProgramError(
                f"the assistant reply did not follow the program's template in {NUM_CHAT_SPEC_TRIES} "
                f"tries (num_api_spec_tokens); last reply: {replies[-1]!r}",
                primitive=" + ".join(
                    repr(p.text) if isinstance(p, TextPart) else f"Gen({p.name!r})" for p in parts
                ),
            )
        for part, value in zip(parts, values, strict=True):
            self._append_text(value)
            if isinstance(part, GenPart):
                self._set_var(part.name, value, meta, part.node_id)

    def fork_children(self, size: int) -> list[Any]:
        """New executors that continue from this state's text, messages, roles and variables."""
        snapshot = self.snapshot_state()
        children = []
        for _ in range(size):
            child = type(self)(
                self.backend,
                self.arguments,
                self.default_sampling_params,
                self.chat_template,
                self.stream,
                # Unlike SGLang, forks keep speculation, so chat-model branches can prefill text.
                num_api_spec_tokens=self.num_api_spec_tokens,
                use_thread=self.use_thread,
            )
            child.restore_state(snapshot)
            children.append(child)
        return children

    def snapshot_state(self) -> dict[str, Any]:
        """A copy of everything a fork inherits (taken under the state lock)."""
        with self._cond:
            return {
                "variables": dict(self.variables),
                "meta_info": dict(self.meta_info),
                "text_": self.text_,
                "messages_": list(self.messages_),
                "cur_role": self.cur_role,
                "cur_role_begin_pos": self.cur_role_begin_pos,
                "images_": list(self.images_),
                "cur_images": list(self.cur_images),
                "videos_": list(self.videos_),
            }

    def restore_state(self, snapshot: dict[str, Any]) -> None:
        with self._cond:
            for key, value in snapshot.items():
                setattr(self, key, value.copy() if isinstance(value, (dict, list)) else value)
            self.fork_start_text_pos = len(self.text_)
            self._cond.notify_all()
