#compdef tenure
# zsh completion for tenure, which needs compinit.
# Load it with: source <(tenure completion zsh)
# tenure itself says what to offer: tenure __complete WORD...

_tenure() {
	local answer line
	local -a candidates
	answer=$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null) || return
	case $answer in
	(:files) compset -P '-*='; _files; return ;;
	(:dirs) compset -P '-*='; _files -/; return ;;
	esac
	for line in "${(@f)answer}"; do
		[[ -n $line ]] || continue
		if [[ $line == *$'\t'* ]]; then
			candidates+=("${${line%%$'\t'*}//:/\\:}:${line#*$'\t'}")
		else
			candidates+=("${line//:/\\:}")
		fi
	done
	_describe -t tenure tenure candidates
}

if [[ $funcstack[1] == _tenure ]]; then
	_tenure "$@"
else
	compdef _tenure tenure
fi
