# bash completion for tenure, which needs the bash-completion package.
# Load it with: source <(tenure completion bash)
# tenure itself says what to offer: tenure __complete WORD...

_tenure() {
	local cur prev words cword
	_init_completion -n =: || return

	local answer
	answer=$("${words[0]}" __complete "${words[@]:1:cword}" 2>/dev/null) || return
	case $answer in
	:files | :dirs)
		[[ $cur == -*=* ]] && cur=${cur#*=}
		if [[ $answer == :dirs ]]; then _filedir -d; else _filedir; fi
		return
		;;
	esac

	local line
	COMPREPLY=()
	while IFS= read -r line; do
		[[ $line ]] && COMPREPLY+=("${line%%$'\t'*}")
	done <<<"$answer"
	# Readline replaces only what follows the word's last = or :.
	local typed=${cur%"${cur##*[=:]}"}
	COMPREPLY=("${COMPREPLY[@]#"$typed"}")
}

complete -F _tenure tenure
