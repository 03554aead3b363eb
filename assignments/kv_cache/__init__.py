"""kv_cache: 한 토큰씩 빠르게 디코딩하기 (멀티헤드 어텐션 다음 과제).

아래 순서대로 파일마다 TODO를 채우고, 한 파일을 끝낼 때마다 `pytest assignments/`를 실행하세요.
각 파일의 맨 위 설명에는 무엇을 작성할지와, 작은 텐서로 계산한 예시(`>>>`)가 있습니다.
그 단계가 왜 필요한지는 노트북에서 각 파일의 설명 뒤에 이어집니다.
예시의 출력은 정답 코드가 실제로 출력하는 값 그대로입니다: 같은 줄을 여러분의 코드로 실행해
비교해 보세요. 뒤 파일의 예시는 앞 파일의 코드를 씁니다 (예: decode.py의 예시는 KVCache를 씀).

모든 파일에 공통인 규칙:
    * 모든 텐서는 배치가 먼저입니다: (B, ...)
    * B = 배치 크기, L = 시퀀스 길이, D = d_model, H = n_heads (쿼리 헤드 수),
      H_kv = n_kv_heads (키/밸류 헤드 수), d_k = D // H (헤드 하나의 크기)
    * 헤드별 텐서는 (B, heads, L, d_k)입니다: mha 과제처럼 시퀀스는 dim 2
    * 마스크는 bool 텐서이고 True = 막힘 (그 키를 보면(attend) 안 됨)입니다.
      F.scaled_dot_product_attention은 반대 규칙 (True = 볼 수 있음)을 쓰고, 이 과제에서는 쓸 수
      없습니다: 바로 이 함수들을 여러분이 작성하는 것입니다.

이 파일은 일부러 아무것도 import하지 않습니다: 한 단계의 파일에 실수가 있어도 나머지 단계는
채점되어야 하기 때문입니다.

단계:

    cache.py     KVCache                                 키-밸류 캐시: 계산한 키와 밸류를 저장
    decode.py    offset_causal_mask, cached_attention    증분 디코딩: 새 쿼리가 캐시된 키 + 새 키를 봄
    gqa.py       repeat_kv, grouped_query_attention      그룹 쿼리 어텐션: 쿼리 헤드보다 적은 키/밸류 헤드
    decoder.py   CachedSelfAttention                     디코더 어텐션 블록: 위의 모든 것을 모듈 하나로
"""
